"""Reading upstream bodies under bounds: decoded size, silence between chunks, and an overall deadline.

httpx would inflate a `Content-Encoding: gzip` body one network chunk at a time with no output bound (a
64 KiB chunk of a gzip bomb becomes 64 MiB at once), so the proxy reads the raw bytes and inflates them
itself, `max_length` bytes per step, counting decoded bytes against the limit as they come. Only gzip and
deflate are accepted, which is all the proxy asks for (`ACCEPT_ENCODING`); anything else is a 502.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

from contextlift.proxy.budget import Lease
from contextlift.proxy.errors import UpstreamBodyTooLarge, UpstreamProtocolError, UpstreamTimeout

ACCEPT_ENCODING = "gzip, deflate"
_STEP = 64 * 1024
"""Most bytes inflated from one step of a compressed body: the memory one step can add."""


class Progress:
    """When a body last made progress as its reader counts it: a stream's reader marks each complete event, so
    bytes that complete none (one a second, say) do not hold the stall timer off."""

    def __init__(self) -> None:
        self.at = time.monotonic()

    def mark(self) -> None:
        self.at = time.monotonic()


async def decoded_chunks(
    response: httpx.Response,
    *,
    max_bytes: int,
    stall_seconds: float,
    deadline: float,
    progress: Progress | None = None,
) -> AsyncIterator[bytes]:
    """The response body, decompressed, in pieces of at most 64 KiB.

    Args:
        max_bytes: most decoded bytes; past them, `UpstreamBodyTooLarge`.
        stall_seconds: longest time without progress; past it, `UpstreamTimeout`. Progress is each raw chunk,
            or, given `progress`, whatever its owner marks.
        deadline: `time.monotonic()` by which the whole body must be in; past it, `UpstreamTimeout`.
    """
    if response.is_stream_consumed:
        # Built in memory (a transport that answers without a network read): httpx holds it decoded already.
        content = response.content
        if len(content) > max_bytes:
            raise UpstreamBodyTooLarge(f"upstream answer longer than the limit of {max_bytes} bytes, decoded")
        for start in range(0, len(content), _STEP):
            yield content[start : start + _STEP]
        return
    inflate = _inflater(response.headers.get("content-encoding", ""))
    raw = aiter(response.aiter_raw())
    total = 0
    by_chunk = progress is None
    clock = Progress() if progress is None else progress
    while True:
        now = time.monotonic()
        wait = min(clock.at + stall_seconds - now, deadline - now)
        try:
            if wait <= 0:
                raise TimeoutError
            async with asyncio.timeout(wait):
                chunk = await anext(raw)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise UpstreamTimeout(_timeout_message(stall_seconds, deadline, by_chunk)) from None
        if by_chunk:
            clock.mark()
        for piece in _pieces(inflate, chunk):
            total += len(piece)
            if total > max_bytes:
                raise UpstreamBodyTooLarge(f"upstream answer longer than the limit of {max_bytes} bytes, decoded")
            yield piece
    if inflate is not None:
        tail = inflate.flush()
        total += len(tail)
        if total > max_bytes:
            raise UpstreamBodyTooLarge(f"upstream answer longer than the limit of {max_bytes} bytes, decoded")
        if tail:
            yield tail


async def read_body(
    response: httpx.Response, *, max_bytes: int, stall_seconds: float, deadline: float, lease: Lease | None
) -> bytes:
    """The whole decoded body, charged to `lease` as it arrives."""
    body = bytearray()
    async for piece in decoded_chunks(response, max_bytes=max_bytes, stall_seconds=stall_seconds, deadline=deadline):
        if lease is not None:
            lease.take(len(piece))
        body += piece
    return bytes(body)


def _inflater(encoding: str) -> zlib._Decompress | None:
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
    if not codings:
        return None
    if codings == ["gzip"] or codings == ["x-gzip"]:
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if codings == ["deflate"]:
        # RFC 9110 deflate is zlib-wrapped; wbits 32+ also accepts gzip, and that is all servers send.
        return zlib.decompressobj(wbits=32 + zlib.MAX_WBITS)
    raise UpstreamProtocolError(f"upstream answered with content-encoding {encoding!r}, which was not asked for")


def _pieces(inflate: zlib._Decompress | None, chunk: bytes) -> Iterator[bytes]:
    """A generator, so that the caller's size check runs after every step, never after a whole chunk."""
    if inflate is None:
        if chunk:
            yield chunk
        return
    data = chunk
    while data:
        try:
            piece = inflate.decompress(data, _STEP)
        except zlib.error as error:
            raise UpstreamProtocolError(f"upstream body is not valid compressed data: {error}") from None
        if piece:
            yield piece
        data = inflate.unconsumed_tail


def _timeout_message(stall_seconds: float, deadline: float, by_chunk: bool) -> str:
    if time.monotonic() >= deadline:
        return "upstream answer did not complete within the upstream deadline"
    if not by_chunk:
        return f"upstream stream stalled: no complete event for {stall_seconds:g} s"
    return f"upstream answer stalled: nothing for {stall_seconds:g} s"
