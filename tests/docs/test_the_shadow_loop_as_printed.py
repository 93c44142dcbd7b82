"""The loop of docs/shadow.md (shadow -> probes -> policy -> auto), run as printed: its commands and environment taken
from the page itself, the proxy a `contextlift serve` process, in front of a scripted upstream that reads only the
first and last quarter of its prompt. Only the two exported values (the upstream's URL, the proxy's port) are
replaced; the test plays the app's part with Lost in the Middle's prompt over nine documents. What the page prints as
the output (the report's lines, the policy's comments, the headers) is what the run gives: `reorder` recovers the
middle on the probes whose question names the needle, not on those that test its ranker, and so no rule."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.proxy.shadow.test_shadow_probes import lost_in_the_middle, request_body
from tests.serving import fake_upstream_url
from tests.serving import request_body as body_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "shadow.md"
SECTION = "## From nothing to a rule: shadow, probes, auto"
MODEL = "your-model"


def blocks() -> list[tuple[str, str]]:
    """The section's fenced blocks, as (language, text), indentation removed."""
    page = PAGE.read_text()
    section = page[page.index(SECTION) :].split("\n## ", 1)[0]
    found = re.findall(r"^( *)```(\w*)\n(.*?)^\1```", section, flags=re.M | re.S)
    return [
        (language, "\n".join(line[len(indent) :] for line in text.splitlines())) for indent, language, text in found
    ]


async def upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The scripted upstream: a model list, and chat answered by `lost_in_the_middle`."""
    if scope["type"] != "http":
        return
    content = await body_of(receive)
    if scope["path"].endswith("/models"):
        status, payload = 200, b'{"object": "list", "data": [{"id": "your-model", "object": "model"}]}'
    else:
        answer = lost_in_the_middle(httpx.Request("POST", "http://upstream.test", content=content))
        status, payload = answer.status_code, answer.content
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def scripted_upstream() -> Iterator[str]:
    with fake_upstream_url(upstream) as url:
        yield url


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


REQUESTS = 36
"""The app's traffic: enough probes of each kind for a kind's lift to hold on its own."""


def test_the_shadow_loop_reaches_the_policy_auto_reads_as_printed(scripted_upstream: str, tmp_path: Path) -> None:
    (exports, serve, commands, report, policy, headers) = blocks()
    assert [exports[0], serve[0], commands[0], policy[0]] == ["bash", "bash", "bash", "toml"]
    port = free_port()
    exported = exports[1]
    exported = re.sub(r"(CONTEXTLIFT_UPSTREAM_URL=)\S+", rf"\g<1>{scripted_upstream}", exported)
    exported = re.sub(r"(CONTEXTLIFT_PORT=)\S+", rf"\g<1>{port}", exported)
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTLIFT_")}
    assert serve[1].rstrip().endswith("&")
    proxy = subprocess.Popen(
        ["bash", "-c", f"{exported}\n{serve[1].rstrip().removesuffix('&')}"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{base}/readyz", timeout=2).status_code == 200, "the proxy to be ready", 30)
        for number in range(REQUESTS):  # the app's traffic: no strategy named, so each model's default, auto
            sent = {**request_body(number), "model": MODEL}
            response = httpx.post(f"{base}/v1/chat/completions", json=sent, timeout=30)
            assert response.status_code == 200, response.text
            assert response.headers["x-context-documents"] == "9"
        sinks = tmp_path / "shadow"
        # Every sample evaluated and its tally written (every 5 s).
        tally = f'"evaluated":{REQUESTS}'
        wait_for(lambda: tally in "".join(p.read_text() for p in sinks.glob("*.jsonl")), "the tally", 180)
        ran = subprocess.run(["bash", "-c", f"{exported}\n{commands[1]}"], cwd=tmp_path, env=environment,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        printed = [line for line in ran.stdout.splitlines() if not line.startswith("report: ")]
        assert printed == report[1].splitlines()
        written = (tmp_path / "policy.toml").read_text()
        for line in policy[1].splitlines():
            assert _undated(line) in _undated(written), line
        auto: dict[str, str] = {}

        def policy_read() -> bool:
            sent = {**request_body(100), "model": MODEL}
            auto.update(httpx.post(f"{base}/v1/chat/completions", json=sent, timeout=30).headers)
            # The built-in policy names itself where no rule matched; a rule of policy.toml names its evidence.
            return "policy=built-in" not in auto["x-context-policy"]

        wait_for(policy_read, "auto to read policy.toml", 30)
        for line in headers[1].splitlines():
            name, value = line.split(": ", 1)
            assert auto[name] == value
    except BaseException:
        os.killpg(proxy.pid, signal.SIGTERM)
        print(proxy.communicate(timeout=60)[0].decode(errors="replace")[-5000:])
        raise
    os.killpg(proxy.pid, signal.SIGTERM)
    output, _ = proxy.communicate(timeout=60)
    assert b"Traceback" not in output


def _undated(text: str) -> str:
    return re.sub(r'date = "[0-9-]+"', 'date = "..."', text)


def wait_for(condition: Any, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if condition():
                return
        except (httpx.HTTPError, OSError, KeyError):
            pass
        assert time.monotonic() < deadline, f"waited {seconds:.0f} s for {what}"
        time.sleep(0.25)
