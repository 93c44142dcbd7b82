"""The scripted fake upstream: an ASGI app that records every request it receives and answers the way the
running case scripted it, plus the building blocks those scripts are made of."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hostile_replay.payloads import chunk_json, completion_json, sse

Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as the fake upstream received it."""

    method: str
    raw_path: bytes
    query: bytes
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def target(self) -> str:
        query = f"?{self.query.decode('latin-1')}" if self.query else ""
        return f"{self.method} {self.raw_path.decode('latin-1')}{query}"

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def wants_stream(self) -> bool:
        return isinstance(self.json, dict) and self.json.get("stream") is True


Handler = Callable[[Seen, Send], Awaitable[None]]


async def start(send: Send, status: int, headers: Mapping[str, str]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})


async def write(send: Send, data: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def reply_json(send: Send, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
    await start(send, status, {"content-type": "application/json", **(headers or {})})
    await write(send, body, more=False)


async def answer_normally(seen: Seen, send: Send) -> None:
    """What a healthy upstream answers: a model list, a completion or a short stream, an empty list."""
    if seen.raw_path.endswith(b"/models"):
        await reply_json(send, 200, b'{"object": "list", "data": [{"id": "hostile-model", "object": "model"}]}')
    elif seen.raw_path.endswith(b"/chat/completions") and seen.wants_stream:
        await streamed([sse(chunk_json("Paris"), chunk_json("."), chunk_json(finish="stop"))])(seen, send)
    elif seen.raw_path.endswith(b"/chat/completions"):
        await reply_json(send, 200, completion_json())
    else:
        await reply_json(send, 200, b'{"object": "list", "data": []}')


def answer(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Handler:
    async def handler(seen: Seen, send: Send) -> None:
        await reply_json(send, status, body, headers)

    return handler


def streamed(pieces: Sequence[bytes], *, gap: float = 0.0, hang: float = 0.0) -> Handler:
    """200 text/event-stream: `pieces` written `gap` seconds apart, then `hang` seconds of silence, then the end."""

    async def handler(seen: Seen, send: Send) -> None:
        await start(send, 200, {"content-type": "text/event-stream"})
        for piece in pieces:
            await write(send, piece)
            await asyncio.sleep(gap)
        await asyncio.sleep(hang)
        await write(send, b"", more=False)

    return handler


def trickle(prefix: bytes, content_type: str) -> Handler:
    """200, `prefix`, then one byte a second without a newline, for longer than any deadline."""

    async def handler(seen: Seen, send: Send) -> None:
        await start(send, 200, {"content-type": content_type})
        await write(send, prefix)
        for _ in range(40):
            await asyncio.sleep(1.0)
            await write(send, b"a")
        await write(send, b"", more=False)

    return handler


def hang(seconds: float) -> Handler:
    """No answer for `seconds`, then a normal one (long after the proxy gave up)."""

    async def handler(seen: Seen, send: Send) -> None:
        await asyncio.sleep(seconds)
        await answer_normally(seen, send)

    return handler


def in_turn(*handlers: Handler) -> Handler:
    """The nth request gets the nth handler; the last one answers every request after."""
    count = [0]

    async def handler(seen: Seen, send: Send) -> None:
        index = min(count[0], len(handlers) - 1)
        count[0] += 1
        await handlers[index](seen, send)

    return handler


def by_stream(streaming: Handler, plain: Handler) -> Handler:
    async def handler(seen: Seen, send: Send) -> None:
        await (streaming if seen.wants_stream else plain)(seen, send)

    return handler


class FakeUpstream:
    """A scripted fake OpenAI-compatible upstream: records every request it receives; `handler` says how it
    answers from now on (cases run one at a time and set it before they send)."""

    def __init__(self) -> None:
        self.handler: Handler = answer_normally
        self._seen: list[Seen] = []
        self._lock = threading.Lock()

    def mark(self) -> int:
        with self._lock:
            return len(self._seen)

    def since(self, mark: int) -> list[Seen]:
        with self._lock:
            return self._seen[mark:]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        seen = Seen(scope["method"], scope["raw_path"], scope["query_string"], headers, bytes(body), time.monotonic())
        with self._lock:
            self._seen.append(seen)
        await self.handler(seen, send)
