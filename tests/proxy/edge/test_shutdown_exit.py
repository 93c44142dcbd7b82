"""The server's part of shutdown: whatever is still open when the grace ends is cut off without a traceback, a
request that has no response yet gets the 503 envelope, and the process is out within grace + 1 s."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.server import ProxyServer, build_server
from contextlift.proxy.local_model import free_port
from tests.fakes import FakeEmbedder, FakeUpstream, chunk, never_answers, stalls_after_one_event
from tests.serving import UPSTREAM, chat, fake_upstream_url, request_body, serve_in_thread

GRACE = 0.6


@pytest.fixture
def server(fake: FakeUpstream) -> Iterator[tuple[ProxyServer, threading.Thread, int]]:
    """The proxy under its server in a thread, with a grace of GRACE s; the app is not told about the drain
    (no `on_drain`), so that only the server can end what is in flight."""
    settings = Settings(upstream_url=UPSTREAM, retry_backoff=0.0, max_retries=0, shutdown_grace=GRACE)
    app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
    proxy_server = build_server(app, settings)
    with serve_in_thread(proxy_server) as (port, thread):
        yield proxy_server, thread, port


def in_background(target: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = target()
        except Exception as error:
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def wait_for_upstream_calls(fake: FakeUpstream, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(fake.requests) < count:
        assert time.monotonic() < deadline, "the request never reached the upstream"
        time.sleep(0.01)


def stop_and_time(proxy_server: ProxyServer, thread: threading.Thread) -> float:
    started = time.monotonic()
    proxy_server.handle_exit(signal.SIGTERM, None)
    thread.join(GRACE + 5)
    return time.monotonic() - started


def test_a_request_with_no_response_at_the_end_of_the_grace_gets_the_503_envelope(
    server: tuple[ProxyServer, threading.Thread, int], fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy_server, thread, port = server
    fake.queue(never_answers)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    client, outcome = in_background(lambda: httpx.post(url, json=chat(), timeout=10))
    wait_for_upstream_calls(fake, 1)
    assert stop_and_time(proxy_server, thread) < GRACE + 1
    client.join(5)
    response = outcome["result"]
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "shutting_down"
    assert response.headers["retry-after"] == "1"
    assert not [record for record in caplog.records if record.exc_info]


def test_a_stream_still_open_at_the_end_of_the_grace_is_cut_without_a_traceback(
    server: tuple[ProxyServer, threading.Thread, int], fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    proxy_server, thread, port = server
    fake.queue(stalls_after_one_event)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    first_event = threading.Event()

    def read_stream() -> list[str]:
        lines = []
        with httpx.stream("POST", url, json=chat(stream=True), timeout=10) as response:
            for line in response.iter_lines():
                lines.append(line)
                first_event.set()
        return lines

    client, _ = in_background(read_stream)
    assert first_event.wait(5)
    assert stop_and_time(proxy_server, thread) < GRACE + 1
    client.join(5)
    assert not client.is_alive()
    assert not [record for record in caplog.records if record.exc_info or record.levelno >= logging.ERROR]


async def stalling_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A fake upstream: `/v1/models` answers; a chat stream sends one event and stalls; a plain chat stalls."""
    if scope["type"] != "http":
        return
    body = await request_body(receive)
    if scope["path"].endswith("/models"):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps({"object": "list", "data": []}).encode()})
        return
    if json.loads(body).get("stream"):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": f"data: {chunk('a')}\n\n".encode(), "more_body": True})
    await asyncio.sleep(3600)


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with fake_upstream_url(stalling_upstream) as url:
        yield url


def test_the_process_exits_within_grace_plus_one_second(upstream_url: str, tmp_path: Path) -> None:
    grace = 2.0
    port = free_port()
    log_path = tmp_path / "proxy.log"
    env = {**os.environ, "CONTEXTLIFT_SHUTDOWN_GRACE": str(grace), "CONTEXTLIFT_LOG_FORMAT": "json"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--upstream", upstream_url, "--port", str(port)],
            env={**env, "HF_HUB_OFFLINE": "1"}, stdout=log, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, log_path.read_text()[-2000:]
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        endpoint = f"{url}/v1/chat/completions"

        def stream() -> None:
            with httpx.stream("POST", endpoint, json=chat(stream=True), timeout=30) as response:
                for _ in response.iter_lines():
                    pass

        clients = [in_background(stream)[0], in_background(lambda: httpx.post(endpoint, json=chat(), timeout=30))[0]]
        with httpx.Client() as idle, socket.create_connection(("127.0.0.1", port)) as half_sent:
            assert idle.get(f"{url}/healthz").status_code == 200  # the connection stays open, idle
            half_sent.sendall(b"GET /healthz HTTP/1.1\r\n")
            time.sleep(1.0)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=grace + 10)
            elapsed = time.monotonic() - started
        for client in clients:
            client.join(5)
    finally:
        process.kill()
    assert code == 0
    assert elapsed < grace + 1
    assert "Traceback" not in log_path.read_text()
