"""`contextlift serve` in front of the embedded SmolLM2 model, started as a user starts it, for the end-to-end
tests (the session's proxy, and those that need settings of their own)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from contextlift.proxy.local_model import free_port

STARTUP_SECONDS = 240


@contextlib.contextmanager
def serving(log_path: Path, **settings: str) -> Iterator[str]:
    """`contextlift serve` in front of the embedded SmolLM2 model, as a user starts it, with `settings` as
    CONTEXTLIFT_ environment variables; yields its URL once ready, stops it after."""
    log = log_path.open("wb")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CONTEXTLIFT_LOG_FORMAT": "json"}
    env.pop("CONTEXTLIFT_UPSTREAM_URL", None)
    env.update({f"CONTEXTLIFT_{name.upper()}": value for name, value in settings.items()})
    process = subprocess.Popen(
        [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"contextlift serve exited: {log_path.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    else:
        process.kill()
        raise RuntimeError("contextlift serve did not become ready")
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
