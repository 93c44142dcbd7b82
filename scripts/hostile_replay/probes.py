"""What is measured beside a case while it runs: `/healthz` latency from a second connection, and the proxy
process's resident memory."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx


@contextlib.asynccontextmanager
async def healthz_probe(url: str) -> AsyncIterator[list[float]]:
    """Polls `/healthz` on its own connection while the block runs; yields [worst latency], kept current."""
    worst = [0.0]
    pending: list[float] = []

    async def poll(client: httpx.AsyncClient) -> None:
        while True:
            pending[:] = [time.monotonic()]
            with contextlib.suppress(httpx.HTTPError):
                await client.get(f"{url}/healthz")
            worst[0] = max(worst[0], time.monotonic() - pending.pop())
            await asyncio.sleep(0.1)

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_keepalive_connections=1)) as client:
        task = asyncio.create_task(poll(client))
        try:
            yield worst
        finally:
            # A poll still waiting when the block ends counts too: a proxy that never answers is the worst case.
            if pending:
                worst[0] = max(worst[0], time.monotonic() - pending[0])
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))


@contextlib.asynccontextmanager
async def rss_growth(proxy: subprocess.Popen[bytes] | None) -> AsyncIterator[list[float]]:
    """Samples the proxy's resident memory every 10 ms while the block runs; yields [peak growth in MiB]."""
    growth = [0.0]
    if proxy is None:
        yield growth
        return
    baseline = _rss_kib(proxy.pid)

    async def sample() -> None:
        with contextlib.suppress(OSError, StopIteration):
            while True:
                growth[0] = max(growth[0], (_rss_kib(proxy.pid) - baseline) / 1024)
                await asyncio.sleep(0.01)

    task = asyncio.create_task(sample())
    try:
        yield growth
    finally:
        await asyncio.sleep(0.05)  # a few more samples: the peak can come just after the last reply
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
