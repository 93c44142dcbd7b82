"""Server-sent events: parse an upstream byte stream event by event, and write well-formed frames.

The decoder is fed network chunks of any size and yields whole events only, however the bytes were split;
the writer emits one `data:` frame per event, so the client sees the upstream's events, never its chunking.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"


class SSEProtocolError(Exception):
    """The upstream stream is not valid server-sent events (e.g. an event over the size limit)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One event: its `data` lines joined by newlines, and its `event` name if any."""

    data: str
    event: str | None = None


class SSEDecoder:
    """Incremental SSE parser (the WHATWG algorithm, minus `id` and `retry`, which chat streams don't use)."""

    def __init__(self, max_event_bytes: int) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        """Bytes at the start of the buffer already known to hold no line break: never searched twice."""
        self._data: list[str] = []
        self._event: str | None = None
        self._event_bytes = 0
        self._max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> Iterator[SSEEvent]:
        """The events completed by this chunk.

        Linear in the bytes fed, however they are split: a line arriving in many small writes is searched
        once, not once per write.

        Raises:
            SSEProtocolError: one event grew past the size limit.
        """
        self._buffer += chunk
        while True:
            line = self._next_line()
            if line is None:
                if len(self._buffer) + self._event_bytes > self._max_event_bytes:
                    raise SSEProtocolError(f"upstream event larger than {self._max_event_bytes} bytes")
                return
            event = self._take_line(line)
            if event is not None:
                yield event

    def flush(self) -> Iterator[SSEEvent]:
        """The last event, if the stream ended without the blank line that should close it."""
        if self._buffer:
            event = self._take_line(bytes(self._buffer))
            self._buffer = bytearray()
            self._scanned = 0
            if event is not None:
                yield event
        event = self._take_line(b"")
        if event is not None:
            yield event

    def _next_line(self) -> bytes | None:
        buffer = self._buffer
        newline = buffer.find(b"\n", self._scanned)
        limit = len(buffer) if newline < 0 else newline
        carriage = buffer.find(b"\r", self._scanned, limit)
        index = carriage if carriage >= 0 else newline
        if index < 0:
            self._scanned = len(buffer)
            return None
        if buffer[index] == 0x0D and index + 1 == len(buffer):
            self._scanned = index  # a lone CR at the end may be the first half of CRLF
            return None
        skip = 2 if buffer[index : index + 2] == b"\r\n" else 1
        line = bytes(buffer[:index])
        del buffer[: index + skip]
        self._scanned = 0
        return line

    def _take_line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            if not self._data:
                self._event = None
                return None
            event = SSEEvent("\n".join(self._data), self._event)
            self._data, self._event, self._event_bytes = [], None, 0
            return event
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        self._event_bytes += len(raw)
        if self._event_bytes > self._max_event_bytes:
            raise SSEProtocolError(f"upstream event larger than {self._max_event_bytes} bytes")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None


def data_frame(payload: str) -> bytes:
    """One event frame carrying `payload`, which may span lines."""
    return "".join(f"data: {line}\n" for line in payload.split("\n")).encode() + b"\n"


def json_frame(payload: Mapping[str, Any]) -> bytes:
    """One event frame carrying a JSON object."""
    return data_frame(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))


def comment_frame(text: str = "keep-alive") -> bytes:
    """A comment, which clients ignore: keeps idle connections and intermediaries from timing out."""
    return f": {text}\n\n".encode()


DONE_FRAME = data_frame(DONE)
