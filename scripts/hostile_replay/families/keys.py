"""Key secrecy (issue 12 item 2): an upstream that echoes the operator's key, in a header or a body, plain,
gzip-encoded or split across stream writes, never shows it to the client."""

from __future__ import annotations

import functools
import gzip
import json
from typing import Any

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.fake_upstream import Handler, Seen, Send, reply_json, streamed
from hostile_replay.payloads import chunk_json, completion_json, sse
from hostile_replay.reply import Reply

KEY_CASES = (  # route, upstream status, streamed, gzip-encoded
    ("embeddings", 401, False, False), ("embeddings", 200, False, False), ("embeddings", 401, False, True),
    ("embeddings", 200, False, True), ("files", 401, False, False), ("files", 200, False, False),
    ("completions", 401, False, False), ("completions", 200, False, False), ("completions", 200, True, False),
    ("completions", 401, False, True), ("chat", 401, False, False), ("chat", 401, False, True),
    ("chat", 200, False, False), ("chat", 200, True, False),
)  # fmt: skip


def echo_credentials(status: int, *, chat: bool, stream: bool, gzipped: bool) -> Handler:
    """An upstream that repeats the Authorization it received, in its body and in `WWW-Authenticate`."""

    async def handler(seen: Seen, send: Send) -> None:
        auth = seen.headers.get("authorization", "")
        token = auth.partition(" ")[2] or auth
        headers = {"www-authenticate": f'Bearer realm="upstream", error="invalid_token", token="{token}"',
                   "x-echo-authorization": auth}  # fmt: skip
        if stream:
            if chat:
                first, second = chunk_json(f"Your key is {token}"), chunk_json(finish="stop")
            else:
                first = json.dumps({"object": "text_completion", "choices": [{"index": 0, "text": f"key {token}"}]})
                second = json.dumps({"object": "text_completion", "choices": [{"index": 0, "text": "."}]})
            body = sse(first, second)
            cut = body.index(token.encode()) + len(token) // 2  # the key split across two writes
            await streamed([body[:cut], body[cut:]], gap=0.05)(seen, send)
            return
        if status >= 400:
            error = {"message": f"Incorrect API key provided: {token}.", "type": "invalid_request_error",
                     "param": None, "code": "invalid_api_key"}  # fmt: skip
            body = json.dumps({"error": error}).encode()
        elif chat:
            body = completion_json(f"Your key is {token}")
        else:
            body = json.dumps({"object": "list", "data": [], "authorization": auth}).encode()
        if gzipped:
            body = gzip.compress(body)
            headers["content-encoding"] = "gzip"
        await reply_json(send, status, body, headers)

    return handler


def key_leaks(ctx: Ctx, reply: Reply) -> list[str]:
    """Where the operator's key (or either half of its random part) shows in what the client received."""
    secret = ctx.key.removeprefix("sk-hostile-")
    needles = (ctx.key, secret[:16], secret[16:])
    places = [f"header {name}" for name, value in reply.raw_headers if any(n in value for n in needles)]
    text = reply.body.decode("latin-1") + reply.decoded.decode("latin-1")
    return places + (["body"] if any(n in text for n in needles) else [])


async def _key_secrecy(route: str, status: int, stream: bool, gzipped: bool, ctx: Ctx) -> Verdict:
    ctx.script(echo_credentials(status, chat=route == "chat", stream=stream, gzipped=gzipped))
    fields: dict[str, Any] = {"stream": True} if stream else {}
    reply = await ctx.call(route, **fields)
    leaks = key_leaks(ctx, reply)
    observed = f"{reply.status}, key in {', '.join(leaks)}" if leaks else f"{reply.status}, key absent"
    return reply.status is not None and not leaks, observed


def key_cases() -> list[Case]:
    cases = []
    for route, status, stream, gzipped in KEY_CASES:
        name = f"{route} {status}{' streamed' if stream else ''}{' gzip' if gzipped else ''} echoing the key"
        run = functools.partial(_key_secrecy, route, status, stream, gzipped)
        cases.append(Case("keys", name, "the key in no header or body the client gets", run, local_only=True))
    return cases
