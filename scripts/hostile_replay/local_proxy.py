"""The local mode's two processes: the fake upstream served from a thread, and a real `contextlift serve`
in front of it, both on loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

from hostile_replay.fake_upstream import FakeUpstream
from hostile_replay.knobs import Knobs, MiB, local_env

ROOT = Path(__file__).resolve().parents[2]
STARTUP_LIMIT = 180.0
"""Seconds the proxy may take to load its embedder on a cold, busy machine before the run gives up."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def local_proxy(knobs: Knobs, key: str, log_path: Path) -> Iterator[tuple[str, FakeUpstream, subprocess.Popen[bytes]]]:
    """The fake upstream in a thread and a real proxy process in front of it, both on loopback; the proxy's
    embedder is loaded when this yields. Raises RuntimeError, with the end of the proxy's log, if it does not
    start."""
    upstream = FakeUpstream()
    upstream_port, proxy_port = free_port(), free_port()
    config = uvicorn.Config(upstream, host="127.0.0.1", port=upstream_port, log_level="critical", lifespan="off",
                            http="h11", h11_max_incomplete_event_size=MiB)  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, name="fake-upstream", daemon=True).start()
    command = [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--host", "127.0.0.1", "--port", str(proxy_port),
               "--upstream", f"http://127.0.0.1:{upstream_port}/v1"]  # fmt: skip
    with log_path.open("wb") as log:
        proxy = subprocess.Popen(command, cwd=ROOT, env=local_env(knobs, key), stdout=log, stderr=log)
    url = f"http://127.0.0.1:{proxy_port}"
    try:
        deadline = time.monotonic() + STARTUP_LIMIT
        while time.monotonic() < deadline and proxy.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/startupz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the proxy did not start (exit status {proxy.poll()}); its log ends:\n{tail}")
        yield url, upstream, proxy
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait(timeout=10)
        server.should_exit = True
