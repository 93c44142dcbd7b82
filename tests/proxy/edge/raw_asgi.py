"""Calls the app at the ASGI level with exact path bytes: HTTP clients normalise `..` and escapes, and an
attacker's bytes are what these tests are about."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    app: Any,
    method: str,
    raw_path: bytes,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
    pieces: list[tuple[float, bytes]] | None = None,
) -> RawResponse:
    """One request; `pieces` (delay, bytes) replaces `body` to dribble it."""
    chunks = pieces if pieces is not None else [(0.0, body)]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote_to_bytes(raw_path).decode("latin-1"),
        "raw_path": raw_path,
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"proxy.test"), *(headers or [])],
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 8080),
    }
    sent = list(chunks)
    answered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if sent:
            delay, piece = sent.pop(0)
            await asyncio.sleep(delay)
            return {"type": "http.request", "body": piece, "more_body": bool(sent)}
        await answered.wait()
        return {"type": "http.disconnect"}

    status = 0
    response_headers: dict[str, str] = {}
    parts: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers.update({k.decode(): v.decode() for k, v in message.get("headers", [])})
        elif message["type"] == "http.response.body":
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    await app(scope, receive, send)
    return RawResponse(status, response_headers, b"".join(parts))
