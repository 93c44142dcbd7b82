"""What every upstream transport shares: the request extensions it reads and sets, the bounds of an answer's head,
the refusal of a malformed answer, and an answer read piece by piece (`RawAnswer`), as `UpstreamClient.fetch` reads
it whichever transport made the call (`proxy.upstream.transport`, or a scripted one in the tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx

WAIT_EXTENSION = "contextlift.waited"
"""A request extension: called with (start, end) in `time.perf_counter()` for each wait on the upstream."""
SENT_EXTENSION = "contextlift.sent"
"""A request extension the transport sets where it knows it: `time.perf_counter()` when the request went out."""

MAX_HEAD_LINE_BYTES = 64 * 1024
"""Longest line (status, or one header) of an upstream answer's head."""
MAX_RESPONSE_HEADERS = 256


class MalformedAnswer(httpx.RemoteProtocolError):
    """The upstream answered, but not with valid HTTP the proxy asked for: an answer head it cannot parse (more
    than `MAX_RESPONSE_HEADERS` headers, a line over `MAX_HEAD_LINE_BYTES`, garbage) or a protocol switch. The
    same request gets the same answer: a fault of the upstream, not a lost connection, and never retried."""


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """An upstream's answer read piece by piece, without `httpx.Response` around it: what a whole-body read
    needs (`UpstreamClient.fetch`)."""

    status_code: int
    headers: httpx.Headers
    encoding: str
    """Its `Content-Encoding`, not yet undone ("" where the body is already decoded)."""
    next_piece: Callable[[], Awaitable[bytes]]
    """The next raw piece of the body, b"" at its end."""
    aclose: Callable[[], Awaitable[None]]
    ready: Callable[[], bool] = lambda: False
    """Whether the rest of the body is in (a read cannot wait), where the transport knows it."""

    @classmethod
    def of(cls, response: httpx.Response) -> RawAnswer:
        """Any transport's answer: its stream read piece by piece, or a body httpx already holds, at once."""
        if response.is_stream_consumed:  # built in memory (a transport that answers without a network read)
            pieces: AsyncIterator[bytes] = _once(response.content)
            encoding = ""
        else:
            assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's
            response.is_stream_consumed = True
            pieces, encoding = aiter(response.stream), response.headers.get("content-encoding", "")

        async def next_piece() -> bytes:
            async for piece in pieces:  # a stream may yield an empty piece before its end
                if piece:
                    return piece
            return b""

        # A transport's stream may say whether the rest of its body is in (`_AiohttpBody.ready`).
        ready: Callable[[], bool] = getattr(response.stream, "ready", _not_ready)
        return cls(response.status_code, response.headers, encoding, next_piece, response.aclose, ready)


def _not_ready() -> bool:
    return False


async def _once(content: bytes) -> AsyncIterator[bytes]:
    if content:
        yield content
