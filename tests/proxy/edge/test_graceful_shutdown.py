"""SIGTERM: readiness turns 503, no new work starts, streams in flight finish within the grace period or
end with an error event."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.proxy.local_model import free_port
from tests.fakes import chunk
from tests.serving import fake_upstream_url

EVENTS = 6
GAP_SECONDS = 0.4


async def slow_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A fake upstream: `/v1/models` answers at once, chat streams EVENTS chunks GAP_SECONDS apart."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"].endswith("/models"):
        body = json.dumps({"object": "list", "data": []}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for i in range(EVENTS):
        await send({"type": "http.response.body", "body": f"data: {chunk(str(i))}\n\n".encode(), "more_body": True})
        await asyncio.sleep(GAP_SECONDS)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with fake_upstream_url(slow_upstream) as url:
        yield url


def start_proxy(upstream_url: str, grace: float, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "CONTEXTLIFT_SHUTDOWN_GRACE": str(grace),
        "CONTEXTLIFT_LOG_FORMAT": "json",
        "HF_HUB_OFFLINE": "1",
    }
    with (tmp_path / "proxy.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--upstream", upstream_url, "--port", str(port)],
            env=env, stdout=log, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError((tmp_path / "proxy.log").read_text()[-2000:])


def stream_lines(url: str, client: httpx.Client, on_first: Any) -> list[str]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    lines = []
    with client.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                lines.append(line.removeprefix("data: "))
                if len(lines) == 1:
                    on_first()
    return lines


def test_sigterm_lets_open_streams_finish_and_refuses_new_work(upstream_url: str, tmp_path: Path) -> None:
    process, url = start_proxy(upstream_url, grace=20, tmp_path=tmp_path)
    with httpx.Client() as client:
        ready_after: list[int | str] = []

        def terminate() -> None:
            process.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            # The listener closes at once, so a new connection is refused; none gets a 200.
            try:
                ready_after.append(httpx.get(f"{url}/readyz", timeout=2).status_code)
            except httpx.ConnectError:
                ready_after.append("refused")

        lines = stream_lines(url, client, terminate)
    assert lines == [chunk(str(i)) for i in range(EVENTS)] + ["[DONE]"]
    assert ready_after in ([503], ["refused"])
    assert process.wait(timeout=20) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz", timeout=1)


def test_streams_outlasting_the_grace_end_with_an_error_event(upstream_url: str, tmp_path: Path) -> None:
    process, url = start_proxy(upstream_url, grace=1, tmp_path=tmp_path)
    with httpx.Client() as client:
        lines = stream_lines(url, client, lambda: process.send_signal(signal.SIGTERM))
    assert 1 <= len(lines) < EVENTS + 1
    assert json.loads(lines[-2])["error"]["code"] == "shutting_down"
    assert lines[-1] == "[DONE]"
    assert process.wait(timeout=20) == 0
