"""Shutdown (issue 12 item 10, issue 20 item 11): on SIGTERM a stalled stream ends with an error event, a
waiting request gets a 503 with `Retry-After`, the process exits within its grace, and logs no traceback.
It stops the proxy, so it runs last; its four cases share one SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import subprocess
import time
from typing import Any

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.fake_upstream import by_stream, hang, streamed
from hostile_replay.payloads import chunk_json, sse
from hostile_replay.reply import Reply


async def _shutdown_scenario(ctx: Ctx) -> dict[str, Any]:
    """A stalled stream and a non-streamed request waiting for the upstream, then SIGTERM."""
    assert ctx.proxy is not None
    mark = ctx.mark()
    ctx.script(by_stream(streamed([sse(chunk_json("partial"), done=False)], hang=30), hang(30)))
    within = ctx.knobs.shutdown_wait
    stream = asyncio.create_task(ctx.chat(ctx.chat_body(stream=True), within=within + 5))
    plain = asyncio.create_task(ctx.chat(ctx.chat_body(), within=within + 5))
    for _ in range(100):
        if len(ctx.chat_calls(mark)) >= 2:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    if ctx.proxy_log is not None:
        ctx.memo["log_at_sigterm"] = ctx.proxy_log.stat().st_size
    ctx.proxy.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        await asyncio.to_thread(ctx.proxy.wait, within)
        exited: float | None = time.monotonic() - sent
    except subprocess.TimeoutExpired:
        exited = None
    return {"stream": await stream, "plain": await plain, "exited": exited}


async def _shutdown(ctx: Ctx) -> dict[str, Any]:
    # Shielded: a case that times out must not cancel the scenario the later cases read.
    if "shutdown" not in ctx.memo:
        ctx.memo["shutdown"] = asyncio.ensure_future(_shutdown_scenario(ctx))
    result: dict[str, Any] = await asyncio.shield(ctx.memo["shutdown"])
    return result


async def _shutdown_stream(ctx: Ctx) -> Verdict:
    reply: Reply = (await _shutdown(ctx))["stream"]
    return reply.ended_with_error(), reply.describe()


async def _shutdown_plain(ctx: Ctx) -> Verdict:
    reply: Reply = (await _shutdown(ctx))["plain"]
    ok = reply.envelope(503) and "retry-after" in reply.headers
    return ok, reply.describe() + (f", Retry-After {reply.headers['retry-after']}" if ok else "")


async def _shutdown_exit(ctx: Ctx) -> Verdict:
    exited = (await _shutdown(ctx))["exited"]
    if exited is None:
        return False, f"still running {ctx.knobs.shutdown_wait:g} s after SIGTERM"
    return exited <= ctx.knobs.shutdown_grace + 1, f"exited {exited:.1f} s after SIGTERM"


def _tracebacks(log: str) -> list[str]:
    """The last line (the exception) of every traceback in the proxy's log."""
    found = []
    for line in log.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "Traceback" in str(record.get("exception", "")):
                found.append(str(record["exception"]).strip().splitlines()[-1])
                continue
        if line.startswith("Traceback"):
            found.append(line)
    return found


async def _no_traceback_at_shutdown(ctx: Ctx) -> Verdict:
    await _shutdown(ctx)
    assert ctx.proxy_log is not None
    log = ctx.proxy_log.read_bytes()
    offset = ctx.memo.get("log_at_sigterm", 0)
    before = _tracebacks(log[:offset].decode(errors="replace"))
    after = _tracebacks(log[offset:].decode(errors="replace"))
    observed = f"{len(after)} after SIGTERM" + (f", first: {ascii(after[0])[:60]}" if after else "")
    if before:  # not this case's requirement, but worth a look: an unexpected error the proxy logged
        observed += f" ({len(before)} earlier in the run, first: {ascii(before[0])[:60]})"
    return not after, observed


def shutdown_cases() -> list[Case]:
    case = functools.partial(Case, "shutdown", local_only=True, timeout=30)
    return [
        case("SIGTERM, grace 2 s: stalled stream", "error event + [DONE]", _shutdown_stream),
        case("SIGTERM, grace 2 s: non-stream waiting", "503 envelope with Retry-After", _shutdown_plain),
        case("SIGTERM, grace 2 s: process exit", "within grace + 1 s", _shutdown_exit),
        case("SIGTERM, grace 2 s: tracebacks in the proxy's log", "none", _no_traceback_at_shutdown),
    ]
