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
from contextlift.proxy.upstream.answers import RawAnswer

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


class _Bounds:
    """One body's bounds as it is read: its decoded size, the silence allowed before each piece, its deadline."""

    def __init__(
        self, encoding: str, max_bytes: int, stall_seconds: float, deadline: float, progress: Progress | None
    ) -> None:
        self._inflate = _inflater(encoding)
        self._max_bytes = max_bytes
        self._stall_seconds = stall_seconds
        self._deadline = deadline
        self._by_piece = progress is None
        self._clock = Progress() if progress is None else progress
        self._total = 0
        self._deadline_nearer = False

    def wait(self) -> float:
        """The longest wait for the next raw piece.

        Raises:
            UpstreamTimeout: none is left.
        """
        now = time.monotonic()
        stall_left, deadline_left = self._clock.at + self._stall_seconds - now, self._deadline - now
        # Which bound a timeout of this wait is: uvloop's timers run on the loop's millisecond clock and can fire
        # a little before `time.monotonic()` reaches the deadline, which then read as a stall.
        self._deadline_nearer = deadline_left <= stall_left
        wait = min(stall_left, deadline_left)
        if wait <= 0:
            raise self.timed_out()
        return wait

    async def next_raw(self, answer: RawAnswer) -> bytes:
        """The answer's next raw piece (b"" at its end), waited for at most `wait()`; a read that cannot wait
        (the rest of the body already in: a small answer's, whole in the head's read) sets no timer.

        Raises:
            UpstreamTimeout: the piece did not come in time.
        """
        if answer.ready():
            return await answer.next_piece()
        try:
            async with asyncio.timeout(self.wait()):
                return await answer.next_piece()
        except TimeoutError:
            raise self.timed_out() from None

    def timed_out(self) -> UpstreamTimeout:
        if self._deadline_nearer or time.monotonic() >= self._deadline:
            return UpstreamTimeout(
                "upstream answer did not complete within the upstream deadline (CONTEXTLIFT_UPSTREAM_DEADLINE)"
            )
        if not self._by_piece:
            return UpstreamTimeout(
                f"upstream stream stalled: no complete event for {self._stall_seconds:g} s "
                "(CONTEXTLIFT_UPSTREAM_TIMEOUT)"
            )
        return UpstreamTimeout(
            f"upstream answer stalled: nothing for {self._stall_seconds:g} s (CONTEXTLIFT_UPSTREAM_TIMEOUT)"
        )

    def decoded(self, raw: bytes) -> Iterator[bytes]:
        """A raw piece, decoded, in steps of at most 64 KiB, counted (`UpstreamBodyTooLarge` past the bound): an
        uncompressed piece whole before any of it goes on (a body a transport holds in memory is one piece), a
        compressed one step by step, each counted before the next is inflated. Progress is marked where it counts
        by the piece."""
        if self._by_piece:
            self._clock.mark()
        if self._inflate is None:
            self._counted(raw)
            for start in range(0, len(raw), _STEP):  # a small piece whole (a full slice of bytes is the same object)
                yield raw[start : start + _STEP]
            return
        for piece in _inflated(self._inflate, raw):
            yield self._counted(piece)

    def tail(self) -> bytes:
        """What the decoder still held at the body's end, counted."""
        return self._counted(self._inflate.flush()) if self._inflate is not None else b""

    def _counted(self, piece: bytes) -> bytes:
        self._total += len(piece)
        if self._total > self._max_bytes:
            raise UpstreamBodyTooLarge(f"upstream answer longer than the limit of {self._max_bytes} bytes, decoded")
        return piece


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
    answer = RawAnswer.of(response)
    bounds = _Bounds(answer.encoding, max_bytes, stall_seconds, deadline, progress)
    while raw := await bounds.next_raw(answer):
        for piece in bounds.decoded(raw):
            yield piece
    if tail := bounds.tail():
        yield tail


async def read_whole(
    answer: RawAnswer, *, max_bytes: int, stall_seconds: float, deadline: float, lease: Lease | None
) -> bytes:
    """The whole decoded body, bounded as `decoded_chunks` bounds it, charged to `lease` as it arrives. A loop of
    its own rather than `decoded_chunks`' generator: a small answer's read is most of what a pass-through call
    does in the proxy. Where the rest of the body is already in (`RawAnswer.ready`) it is read without a timer,
    so a body whose last bytes came just before its deadline is taken, not refused."""
    bounds = _Bounds(answer.encoding, max_bytes, stall_seconds, deadline, None)
    body = bytearray()
    while raw := await bounds.next_raw(answer):
        for piece in bounds.decoded(raw):
            if lease is not None:
                lease.take(len(piece))
            body += piece
    if tail := bounds.tail():
        if lease is not None:
            lease.take(len(tail))
        body += tail
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


def _inflated(inflate: zlib._Decompress, chunk: bytes) -> Iterator[bytes]:
    """A generator, so that the caller's size check runs after every step, never after a whole chunk."""
    data = chunk
    while data:
        try:
            piece = inflate.decompress(data, _STEP)
        except zlib.error as error:
            raise UpstreamProtocolError(f"upstream body is not valid compressed data: {error}") from None
        if piece:
            yield piece
        data = inflate.unconsumed_tail
