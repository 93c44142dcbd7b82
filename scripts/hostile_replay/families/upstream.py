"""A faulty or hostile upstream (issue 12 items 6, 7, 9, 11-15; issue 20 items 2, 9, 10, 12, 13): invalid
JSON, gzip bombs, bad `Retry-After`, huge, broken or trickling streams, cookies, pool exhaustion. Every
failure reaches the client as an error envelope or an error event, in bounded time and memory."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
from collections.abc import Sequence
from typing import Any

import httpx

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.fake_upstream import Seen, Send, answer, answer_normally, in_turn, reply_json, streamed, trickle
from hostile_replay.http_client import http_send
from hostile_replay.payloads import DOCS_PROMPT, chunk_json, completion_json, gzip_bomb, server_error, sse
from hostile_replay.probes import rss_growth
from hostile_replay.reply import Reply, tally

SURROGATE_COMPLETION = completion_json("caf\ud800")
NAN_COMPLETION = completion_json("Paris.", usage={"prompt_tokens": float("nan"), "completion_tokens": 2})
SURROGATE_CHUNK = chunk_json("caf\ud800")
NAN_CHUNK = json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
                        "usage": {"prompt_tokens": float("nan")}})  # fmt: skip
NO_DONE = [sse(chunk_json("Hello"), chunk_json(finish="stop"), done=False)]
MALFORMED = [sse(chunk_json("Hello"), done=False), b'data: {"choices": [\n\n',
             sse(chunk_json(" world"), chunk_json(finish="stop"))]  # fmt: skip
FIVE_CHOICES = [
    sse(
        *[chunk_json("", index=i) for i in range(5)],
        *[chunk_json(f"answer {i}", index=i) for i in range(5)],
        *[chunk_json(finish="stop", index=i) for i in range(5)],
    )
]
RETRY_AFTER = (("Retry-After", "nan"), ("Retry-After", "-inf"), ("Retry-After", "-5"), ("retry-after-ms", "-5000"))


async def _invalid_answer(answer_body: bytes, ctx: Ctx) -> Verdict:
    ctx.script(answer(200, answer_body))
    reply = await ctx.chat(ctx.chat_body())
    ok = reply.envelope(502) or (reply.status == 200 and reply.body == answer_body)
    return ok, reply.describe() + (" (the upstream's bytes)" if reply.body == answer_body else "")


async def _invalid_stream(bad_event: str, ctx: Ctx) -> Verdict:
    ctx.script(streamed([sse(chunk_json("ok"), bad_event, chunk_json(finish="stop"))]))
    reply = await ctx.chat(ctx.chat_body(stream=True))
    verbatim = bad_event in reply.events
    ok = reply.status == 200 and reply.done and (bool(reply.error_events) or verbatim)
    return ok, reply.describe() + (", bad event verbatim" if verbatim else "")


async def _invalid_medoid(answer_body: bytes, stream: bool, ctx: Ctx) -> Verdict:
    ctx.script(answer(200, answer_body))
    reply = await ctx.chat(ctx.chat_body(DOCS_PROMPT, stream=stream), {"X-Context-Strategy": "medoid"})
    return (reply.ended_with_error() if stream else reply.envelope(502)), reply.describe()


async def _bomb(route: str, status: int, concurrent: int, ctx: Ctx) -> Verdict:
    ctx.script(answer(status, gzip_bomb(), {"content-encoding": "gzip"}))
    async with rss_growth(ctx.proxy) as growth:
        replies = await asyncio.gather(*(ctx.call(route) for _ in range(concurrent)))
    ok = all(r.envelope(502) for r in replies) and growth[0] < 64
    return ok, f"{tally(replies)}, RSS +{growth[0]:.0f} MiB"


async def _retry_after(name: str, value: str, ctx: Ctx) -> Verdict:
    ctx.script(in_turn(answer(503, server_error("busy"), {name.lower(): value}), answer_normally))
    reply, calls = await ctx.chat_seen(ctx.chat_body())
    times = [s.at for s in calls]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Jitter takes the first backoff down by up to half; a quarter less again leaves room for timer granularity.
    least = ctx.knobs.retry_backoff / 2 * 0.75
    ok = reply.status == 200 and len(times) == 2 and min(gaps) >= least
    return ok, f"{reply.describe()}, {len(times)} calls, gaps {[round(g, 2) for g in gaps]} s"


async def _big_event(ctx: Ctx) -> Verdict:
    event = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"a" * 4_700_000 + b'"},"finish_reason":null}]}\n\n'
    pieces = [event[i : i + 2048] for i in range(0, len(event), 2048)] + [b"data: [DONE]\n\n"]
    ctx.script(streamed(pieces))
    reply = await ctx.chat(ctx.chat_body(stream=True), within=15)
    return reply.ended_with_error(), f"{reply.describe()} in {reply.seconds:.1f} s"


async def _clean_stream(pieces: Sequence[bytes], needle: str, fields: dict[str, Any], ctx: Ctx) -> Verdict:
    """OK if the stream the upstream sends reaches the client as strict JSON events with `needle` in them,
    ended by `[DONE]`."""
    ctx.script(streamed(pieces))
    reply = await ctx.chat(ctx.chat_body(stream=True, **fields))
    relayed = needle in "".join(reply.events)
    return reply.status == 200 and reply.done and relayed and not reply.invalid_events, reply.describe()


async def _trickled_stream(ctx: Ctx) -> Verdict:
    ctx.script(trickle(b'data: {"choices":[{"index":0,"delta":{"content":"', "text/event-stream"))
    limit = ctx.knobs.bounds.deadline
    reply = await ctx.chat(ctx.chat_body(stream=True), within=limit + 5)
    ok = reply.ended_with_error() and reply.seconds <= limit
    return ok, f"{reply.describe()} after {reply.seconds:.1f} s"


async def _trickled_body(ctx: Ctx) -> Verdict:
    ctx.script(trickle(b'{"object": "text_completion", "choices": [{"text": "', "application/json"))
    limit = ctx.knobs.bounds.deadline
    body = json.dumps({"model": ctx.model, "prompt": "Say hi.", "max_tokens": 8}).encode()
    reply = await ctx.send("POST", "/v1/completions", content=body, within=limit + 5)
    ended = reply.cut is None or not reply.cut.startswith("still open")
    ok = ended and reply.seconds <= limit
    return ok, f"{reply.status}, {len(reply.body)} bytes, {'ended' if ended else 'open'} after {reply.seconds:.1f} s"


async def _sdk_retried_already(ctx: Ctx) -> Verdict:
    ctx.script(answer(500, server_error("boom")))
    reply, calls = await ctx.chat_seen(ctx.chat_body(), {"x-stainless-retry-count": "1"})
    return len(calls) == 1, f"{reply.status}, {len(calls)} upstream calls"


async def _medoid_storm(ctx: Ctx) -> Verdict:
    ctx.script(answer(503, server_error("busy")))
    k = ctx.knobs.medoid_cap
    reply, calls = await ctx.chat_seen(ctx.chat_body(DOCS_PROMPT), {"X-Context-Strategy": f"medoid; k={k}"})
    return len(calls) <= k + ctx.knobs.retry_budget, f"{reply.status}, {len(calls)} upstream calls"


async def _cookies(route: str, ctx: Ctx) -> Verdict:
    count = [0]

    async def set_cookie(seen: Seen, send: Send) -> None:
        count[0] += 1
        body = completion_json() if route == "chat" else b'{"object": "list", "data": []}'
        await reply_json(send, 200, body, {"set-cookie": f"hostile_session=client-{count[0]}; Path=/"})

    async def as_a_new_client() -> Reply:
        async with httpx.AsyncClient(base_url=ctx.url, timeout=20) as client:  # its own cookie jar
            if route == "models":
                return await http_send(client, "GET", "/v1/models")
            headers = {"content-type": "application/json"}
            return await http_send(client, "POST", "/v1/chat/completions", headers=headers, content=ctx.chat_body())

    ctx.script(set_cookie)
    await as_a_new_client()
    mark = ctx.mark()
    reply = await as_a_new_client()
    cookies = [s.headers["cookie"] for s in ctx.seen(mark) if "cookie" in s.headers]
    observed = f"{reply.status}, second client's upstream request {'carried ' + cookies[0] if cookies else 'no cookie'}"
    return reply.status == 200 and not cookies, observed


async def _pool_wait(ctx: Ctx) -> Verdict:
    async def slow(seen: Seen, send: Send) -> None:
        await asyncio.sleep(2.5)  # well under the upstream timeout (4 s), but not twice over
        await reply_json(send, 200, completion_json())

    ctx.script(slow)
    replies = await asyncio.gather(*(ctx.chat(ctx.chat_body()) for _ in range(6)))
    blamed = [r for r in replies if r.status == 504 or r.code == "upstream_timeout"]
    fine = all(r.status == 200 or r.envelope(503) for r in replies)
    return fine and not blamed, tally(replies)


def upstream_cases() -> list[Case]:
    case = functools.partial(Case, "upstream", local_only=True)
    p = functools.partial
    relayed = "502 envelope, or the upstream's bytes untouched"
    streamed_bad = "error event + [DONE], or the event verbatim + [DONE]"
    bounded = "502 envelope each, RSS growth < 64 MiB"
    backoff = "200 after 2 calls >= 0.15 s apart (jittered backoff)"
    no_cookie = "200, no cookie on the other client's request"
    return [
        case("lone surrogate in the answer", relayed, p(_invalid_answer, SURROGATE_COMPLETION)),
        case("lone surrogate in a stream event", streamed_bad, p(_invalid_stream, SURROGATE_CHUNK)),
        case("lone surrogate answers, streamed medoid", "error event + [DONE]",
             p(_invalid_medoid, SURROGATE_COMPLETION, True)),
        case("NaN in the answer", relayed, p(_invalid_answer, NAN_COMPLETION)),
        case("NaN in a stream event", streamed_bad, p(_invalid_stream, NAN_CHUNK)),
        case("NaN answers, medoid", "502 envelope", p(_invalid_medoid, NAN_COMPLETION, False)),
        case("gzip bomb 401 on embeddings", bounded, p(_bomb, "embeddings", 401, 1), probe=True),
        case("gzip bomb chat answer", bounded, p(_bomb, "chat", 200, 1), probe=True),
        case("3 concurrent gzip bombs 401 on embeddings", bounded, p(_bomb, "embeddings", 401, 3), probe=True),
        *(case(f"{name}: {value}", backoff, p(_retry_after, name, value)) for name, value in RETRY_AFTER),
        case("4.7 MB SSE event in 2 KB writes", "error event + [DONE]; /healthz < 1 s", _big_event, probe=True),
        case("stream ends without [DONE] after finish_reason", "content, then [DONE]",
             p(_clean_stream, NO_DONE, "Hello", {})),
        case("malformed SSE event", "[DONE], no malformed event relayed", p(_clean_stream, MALFORMED, "", {})),
        case("stream trickling 1 byte/s", "error event + [DONE] within {deadline}", _trickled_stream),
        case("passthrough body trickling 1 byte/s", "ended within {deadline}", _trickled_body),
        case("x-stainless-retry-count: 1, persistent 500", "1 upstream call", _sdk_retried_already),
        case("medoid; k=2 under a 503 storm", "at most k + retry_budget (3) upstream calls", _medoid_storm),
        case("Set-Cookie to one client, models", no_cookie, p(_cookies, "models")),
        case("Set-Cookie to one client, chat", no_cookie, p(_cookies, "chat")),
        case("streamed n=5 with include_usage", "[DONE], never a cut stream",
             p(_clean_stream, FIVE_CHOICES, "", {"n": 5, "stream_options": {"include_usage": True}})),
        case("non-object choices, streamed medoid", "error event + [DONE]",
             p(_invalid_medoid, completion_json(choices=["not an object"]), True)),
        case("6 requests for a pool of 4, 2.5 s upstream", "200 or 503 envelope each, never 504 upstream_timeout",
             _pool_wait),
    ]  # fmt: skip
