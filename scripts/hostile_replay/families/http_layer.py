"""The HTTP layer (issue 12 item 5, issue 20 items 4 and 5): slow and silent clients are cut off in time
without crowding out others, request smuggling and oversized or malformed heads are refused, on a raw socket.
(Named `http_layer` rather than `http` so that no reader mistakes it for the standard library's package.)"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Sequence

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.raw_http import request_head
from hostile_replay.reply import Reply

TLS_HELLO = bytes.fromhex("16030100c4010000c00303") + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00"
CR_ONLY = b"GET /healthz HTTP/1.1\rHost: x\rConnection: close\r\r"
FOUR_XX = range(400, 500)


def _timed(reply: Reply) -> str:
    return reply.describe() + (f" in {reply.seconds:.1f} s" if reply.status else "")


def _post_head(ctx: Ctx, path: str, *fields: tuple[str, str]) -> bytes:
    return request_head("POST", path, ctx.netloc, [("Content-Type", "application/json"), *fields])


def _slowloris(ctx: Ctx) -> list[bytes]:
    return [f"GET /healthz HTTP/1.1\r\nHost: {ctx.netloc}\r\nX-Slow: ".encode()] + [b"a"] * 400


def _slow_body(ctx: Ctx) -> list[bytes]:
    """A chat request that announces 100 bytes of body, then sends them one write at a time."""
    return [_post_head(ctx, "/v1/chat/completions", ("Content-Length", "100"), *ctx.auth.items())] + [b" "] * 99


async def _answered_or_closed(
    writes: Callable[[Ctx], Sequence[bytes]], statuses: Collection[int], limit: float | None, ctx: Ctx,
    *, gap: float = 0.0, server_words: bool = False,
) -> Verdict:  # fmt: skip
    """OK if, within `limit` seconds (the header bound by default), the proxy answers with an envelope of one
    of `statuses` or closes the connection without a word. `server_words`: bytes that are not an HTTP request
    never reach the app, and the HTTP server's own 400 (uvicorn's plain text) is an answer too."""
    limit = limit if limit is not None else ctx.knobs.bounds.header
    reply = await ctx.exchange(writes(ctx), gap=gap, wait=limit + 3)
    answered = reply.status in statuses and (reply.code is not None or (server_words and reply.status == 400))
    ok = (answered or (reply.status is None and reply.closed)) and reply.seconds <= limit
    return ok, _timed(reply)


async def _idle_keepalive(ctx: Ctx) -> Verdict:
    limit = ctx.knobs.bounds.keepalive
    reply = await ctx.exchange([ctx.raw_request("GET", "/healthz", close=False)], wait=limit + 4, until_close=True)
    idle = reply.ended - reply.seconds
    if reply.status != 200:
        return False, reply.describe()
    if not reply.closed:
        return False, f"200, then still open after {idle:.1f} s idle"
    return idle <= limit, f"200, then closed after {idle:.1f} s idle"


async def _slow_body_408(ctx: Ctx) -> Verdict:
    limit = ctx.knobs.bounds.body
    reply = await ctx.exchange(_slow_body(ctx), gap=1.0, wait=limit + 3)
    return reply.envelope(408) and reply.seconds <= limit, _timed(reply)


async def _slow_bodies_leave_room(ctx: Ctx) -> Verdict:
    count = ctx.knobs.max_in_flight + 2

    async def dribble() -> None:
        _, writer = await ctx.connect()
        head, *rest = _slow_body(ctx)
        try:
            writer.write(head)
            for byte in rest:
                await writer.drain()
                await asyncio.sleep(1.0)
                writer.write(byte)
        finally:
            writer.close()

    dribblers = [asyncio.create_task(dribble()) for _ in range(count)]
    try:
        await asyncio.sleep(0.5)
        statuses = [(await ctx.call("chat")).status for _ in range(3)]
    finally:
        for task in dribblers:
            task.cancel()
        await asyncio.gather(*dribblers, return_exceptions=True)
    return statuses == [200] * 3, f"{statuses} while {count} bodies dribbled a byte a second"


async def _smuggling(path: str, ctx: Ctx) -> Verdict:
    hidden = request_head("GET", "/v1/models?smuggled=1", ctx.netloc, [])
    body = b"0\r\n\r\n" + hidden
    request = _post_head(ctx, path, ("Content-Length", str(len(body))), ("Transfer-Encoding", "chunked")) + body
    mark = ctx.mark()
    reply = await ctx.exchange([request], wait=3.0, until_close=True)
    ok = reply.envelope(400) and reply.closed and not reply.more
    observed = f"{reply.describe()}, {'closed' if reply.closed else 'left open'}, {reply.more} more responses"
    return ctx.nothing_upstream(mark, ok, observed)


async def _two_lengths(ctx: Ctx) -> Verdict:
    body = b'{"model": "x", "input": "hostile"}'
    request = _post_head(ctx, "/v1/embeddings", ("Content-Length", str(len(body))), ("Content-Length", "5")) + body
    mark = ctx.mark()
    reply = await ctx.exchange([request], wait=3.0, until_close=True)
    # Not a request the HTTP server can read: its own 400 (plain text), an envelope, or a close.
    ok = (reply.status == 400 or reply.status is None) and reply.closed and not reply.more
    return ctx.nothing_upstream(mark, ok, f"{reply.describe()}, {'closed' if reply.closed else 'left open'}")


async def _large_head(kib: int, expected_status: int, ctx: Ctx) -> Verdict:
    # X-Context-* headers are the proxy's own and never go upstream, so only the proxy's limit is measured.
    request = ctx.raw_request("GET", "/v1/models", {"X-Context-Hostile-Pad": "a" * (kib * 1024)})
    half = len(request) // 2
    reply = await ctx.exchange([request[:half], request[half:]], gap=0.2)
    ok = reply.status == 200 if expected_status == 200 else reply.envelope(expected_status)
    return ok, reply.describe()


async def _many_headers(ctx: Ctx) -> Verdict:
    headers = {f"X-Context-Hostile-{i}": "v" for i in range(120)}
    reply = await ctx.exchange([ctx.raw_request("GET", "/v1/models", headers)])
    return reply.envelope(431), reply.describe()


def http_cases() -> list[Case]:
    case = functools.partial(Case, "http")
    p = functools.partial
    smuggled = "400 envelope, closed, nothing upstream"
    return [
        case("slowloris headers (a byte every 0.25 s)", "408 envelope or closed within {header}",
             p(_answered_or_closed, _slowloris, (408,), None, gap=0.25), timeout=30),
        case("silent connection", "closed (or 408 envelope) within {header}",
             p(_answered_or_closed, lambda ctx: [], (408,), None), timeout=30),
        case("idle keep-alive connection", "closed within {keepalive} idle", _idle_keepalive, timeout=30),
        case("Content-Length: 100, then a byte a second", "408 envelope within {body}", _slow_body_408, timeout=90),
        case("max_in_flight + 2 slow bodies, then 3 requests", "[200, 200, 200]", _slow_bodies_leave_room),
        case("CL + TE smuggling on embeddings", smuggled, p(_smuggling, "/v1/embeddings")),
        case("CL + TE smuggling on chat", smuggled, p(_smuggling, "/v1/chat/completions")),
        case("two different Content-Length", "400 (or closed), nothing upstream", _two_lengths),
        case("24 KiB head in two writes", "200", p(_large_head, 24, 200)),
        case("40 KiB head in two writes", "431 envelope", p(_large_head, 40, 431)),
        case("120 headers", "431 envelope", _many_headers),
        case("CR-only line endings", "4xx or closed within {header}",
             p(_answered_or_closed, lambda ctx: [CR_ONLY], FOUR_XX, None, server_words=True), timeout=30),
        case("protocol garbage", "400, or closed within 1.5 s",
             p(_answered_or_closed, lambda ctx: [b"GARBAGE\r\n\r\n"], FOUR_XX, 1.5, server_words=True)),
        case("TLS hello on the plain port", "400, or closed within 1.5 s",
             p(_answered_or_closed, lambda ctx: [TLS_HELLO], FOUR_XX, 1.5, server_words=True)),
    ]  # fmt: skip
