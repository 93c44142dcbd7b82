"""Upstream edges (hardening part three, items 9-13 and 16-18): a stream that trickles bytes without completing
an event, answers that are not valid HTTP, a reset mid-answer, redirects, a chunk of an unexpected shape, a full
connection pool, a client that asks for no retries, a cap no request could meet, and a flood of malformed
requests. Each is one upstream call at most where it cannot succeed, and reaches the client as an error envelope
or an error event in bounded time; none is blamed on the proxy."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
import sys
import time
from typing import Any

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.fake_upstream import Seen, Send, reply_json, start, streamed, trickle, write
from hostile_replay.knobs import TIMER_SLACK, local_env
from hostile_replay.local_proxy import ROOT, free_port
from hostile_replay.payloads import chunk_json, completion_json, server_error, sse
from hostile_replay.reply import tally

UPSTREAM_TIMEOUT = 4.0
"""The local proxy's upstream_timeout (`knobs.local_env`): shorter than its deadline, so the two can be told apart."""
ELSEWHERE = "http://attacker.example/v1/chat/completions"
ODD_CHUNK = json.dumps({"id": "x", "choices": 5})


def _socket(send: Send) -> Any:
    """The connection under the fake upstream's ASGI `send` (uvicorn's h11 cycle holds it), for the answers no
    ASGI server would write: an unasked protocol switch, a reset in the middle of a body."""
    return getattr(send, "__self__").transport  # noqa: B009 (the attribute of a bound method, not a constant name)


async def _switching_protocols(seen: Seen, send: Send) -> None:
    connection = _socket(send)
    connection.write(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n")
    await asyncio.sleep(0.5)
    connection.abort()
    await asyncio.sleep(0.05)  # uvicorn sees the connection gone and writes nothing more on it


async def _many_headers(seen: Seen, send: Send) -> None:
    await reply_json(send, 200, completion_json(), {f"x-h{i}": str(i) for i in range(300)})


async def _reset_mid_body(seen: Seen, send: Send) -> None:
    await start(send, 200, {"content-type": "application/json", "content-length": "4000"})
    await write(send, b'{"id": "chatcmpl-cut", "choices": [')
    await asyncio.sleep(0.1)
    _socket(send).abort()
    await asyncio.sleep(0.05)


async def _redirect(seen: Seen, send: Send) -> None:
    await reply_json(send, 307, b"", {"location": ELSEWHERE})


async def _one_call_502(handler: Any, code: str, stream: bool, ctx: Ctx) -> Verdict:
    ctx.script(handler)
    reply, calls = await ctx.chat_seen(ctx.chat_body(stream=stream))
    message = reply.decoded.decode("utf-8", errors="replace")
    ok = reply.envelope(502) and reply.code == code and len(calls) == 1 and "before answering" not in message
    return ok, f"{reply.describe()}, {len(calls)} upstream calls"


async def _redirect_relayed_call(ctx: Ctx) -> Verdict:
    ctx.script(_redirect)
    mark = ctx.mark()
    reply = await ctx.call("models")
    calls = len(ctx.seen(mark))
    leaked = "location" in reply.headers or ELSEWHERE.encode() in reply.decoded
    ok = reply.envelope(502) and reply.code == "upstream_redirect" and calls == 1 and not leaked
    return ok, f"{reply.describe()}, {calls} upstream calls" + (", Location relayed" if leaked else "")


async def _redirect_chat(stream: bool, ctx: Ctx) -> Verdict:
    ctx.script(_redirect)
    reply, calls = await ctx.chat_seen(ctx.chat_body(stream=stream))
    leaked = "location" in reply.headers or ELSEWHERE.encode() in reply.decoded
    ok = reply.envelope(502) and reply.code == "upstream_redirect" and len(calls) == 1 and not leaked
    return ok, f"{reply.describe()}, {len(calls)} upstream calls" + (", Location relayed" if leaked else "")


async def _event_less_trickle(ctx: Ctx) -> Verdict:
    ctx.script(trickle(b'data: {"choices":[{"index":0,"delta":{"content":"', "text/event-stream"))
    limit = UPSTREAM_TIMEOUT + TIMER_SLACK
    reply = await ctx.chat(ctx.chat_body(stream=True), within=ctx.knobs.bounds.deadline + 5)
    ok = reply.ended_with_error() and reply.seconds <= limit
    return ok, f"{reply.describe()} after {reply.seconds:.1f} s"


async def _odd_chunk_with_usage(ctx: Ctx) -> Verdict:
    ctx.script(streamed([sse(chunk_json("Hello"), ODD_CHUNK, chunk_json(finish="stop"))]))
    reply = await ctx.chat(ctx.chat_body(stream=True, stream_options={"include_usage": True}))
    blamed = [e for e in reply.error_events if "internal_error" in e]
    ok = reply.status == 200 and reply.done and not blamed
    return ok, reply.describe() + (", internal_error event" if blamed else "")


async def _full_pool(ctx: Ctx) -> Verdict:
    async def slow(seen: Seen, send: Send) -> None:
        await asyncio.sleep(3.0)  # under the upstream timeout (4 s), far over the pool wait
        await reply_json(send, 200, completion_json())

    ctx.script(slow)
    started = time.monotonic()

    async def timed() -> tuple[Any, float]:
        reply = await ctx.chat(ctx.chat_body())
        return reply, time.monotonic() - started

    results = await asyncio.gather(*(timed() for _ in range(8)))
    replies = [r for r, _ in results]
    refused = [seconds for r, seconds in results if r.envelope(503) and r.code == "upstream_pool_exhausted"]
    served = sum(r.status == 200 for r in replies)
    limit = ctx.knobs.upstream_pool_wait + TIMER_SLACK
    ok = served + len(refused) == len(replies) and bool(refused) and max(refused) <= limit
    slowest = f", slowest 503 after {max(refused):.1f} s" if refused else ""
    return ok, tally(replies) + slowest


async def _no_retries(ctx: Ctx) -> Verdict:
    ctx.script(lambda seen, send: reply_json(send, 503, server_error("busy")))
    reply, calls = await ctx.chat_seen(ctx.chat_body(), {"X-Context-Retries": "0"})
    forwarded = [s for s in calls if "x-context-retries" in s.headers]
    ok = reply.status == 503 and len(calls) == 1 and not forwarded
    return ok, f"{reply.status}, {len(calls)} upstream calls" + (", header forwarded" if forwarded else "")


async def _retries_repeated(ctx: Ctx) -> Verdict:
    # A header sent twice is the same as its values joined by a comma (RFC 9110, 5.3): the smallest counts.
    ctx.script(lambda seen, send: reply_json(send, 503, server_error("busy")))
    reply, calls = await ctx.chat_seen(ctx.chat_body(), {"X-Context-Retries": "2, 0"})
    return reply.status == 503 and len(calls) == 1, f"{reply.status}, {len(calls)} upstream calls"


async def _retries_malformed(ctx: Ctx) -> Verdict:
    return await ctx.refused(ctx.chat(ctx.chat_body(), {"X-Context-Retries": "all of them"}))


async def _cap_below_minimum(ctx: Ctx) -> Verdict:
    env = {**local_env(ctx.knobs, ctx.key), "CONTEXTLIFT_STRATEGY_CAPS": json.dumps({"medoid.k": 0})}
    command = [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--host", "127.0.0.1",
               "--port", str(free_port()), "--upstream", "http://127.0.0.1:9/v1"]  # fmt: skip
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        async with asyncio.timeout(40):
            _, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return False, "still serving after 40 s"
    said = b"below the parameter's minimum" in err
    seconds = time.monotonic() - started
    return process.returncode == 1 and said, f"exit {process.returncode} after {seconds:.1f} s" + (
        ", reason given" if said else ", no reason"
    )


async def _malformed_flood(ctx: Ctx) -> Verdict:
    assert ctx.proxy_log is not None
    before = ctx.proxy_log.read_bytes().count(b"Invalid HTTP request received")
    for _ in range(40):
        await ctx.exchange([b"GARBAGE\r\n\r\n"], wait=2.0, until_close=True)
    await asyncio.sleep(0.5)  # the proxy's log is written by another process
    lines = ctx.proxy_log.read_bytes().count(b"Invalid HTTP request received") - before
    return lines <= 1, f"{lines} warning lines in the proxy's log"


def upstream_edge_cases() -> list[Case]:
    case = functools.partial(Case, "upstream-edges", local_only=True)
    p = functools.partial
    one_call = "502 {code}, 1 upstream call, not 'before answering'"
    return [
        case("stream trickling bytes, no event ever complete", "error event + [DONE] within upstream_timeout "
             f"+ slack ({UPSTREAM_TIMEOUT + TIMER_SLACK:g} s), not the deadline", _event_less_trickle),
        case("unasked 101 Switching Protocols", one_call.format(code="upstream_protocol_error"),
             p(_one_call_502, _switching_protocols, "upstream_protocol_error", False)),
        case("answer head with 300 headers", one_call.format(code="upstream_protocol_error"),
             p(_one_call_502, _many_headers, "upstream_protocol_error", False)),
        case("answer head with 300 headers, streamed", one_call.format(code="upstream_protocol_error"),
             p(_one_call_502, _many_headers, "upstream_protocol_error", True)),
        case("reset in the middle of the answer", "502 upstream_connection_lost, 1 upstream call",
             p(_one_call_502, _reset_mid_body, "upstream_connection_lost", False)),
        case("307 to another host, chat", "502 upstream_redirect, no Location, 1 upstream call",
             p(_redirect_chat, False)),
        case("307 to another host, streamed chat", "502 upstream_redirect, no Location, 1 upstream call",
             p(_redirect_chat, True)),
        case("307 to another host, models", "502 upstream_redirect, no Location, 1 upstream call",
             _redirect_relayed_call),
        case('chunk {"choices": 5} with include_usage', "[DONE], no internal_error event", _odd_chunk_with_usage),
        case("8 requests for a pool of 4, 3 s upstream", "200 or 503 upstream_pool_exhausted, each 503 within "
             "upstream_pool_wait + slack", _full_pool, timeout=30),
        case("X-Context-Retries: 0, persistent 503", "1 upstream call, header not forwarded", _no_retries),
        case("X-Context-Retries: 2, 0 (a repeated header)", "the smallest: 1 upstream call", _retries_repeated),
        case("X-Context-Retries: all of them", "400 envelope, nothing upstream", _retries_malformed),
        case("serve with strategy_caps medoid.k = 0", "exit 1 with the reason, never serving", _cap_below_minimum,
             timeout=60),
        case("40 malformed requests on 40 connections", "at most 1 warning line in the proxy's log",
             _malformed_flood, timeout=60),
    ]  # fmt: skip
