"""What the client received: one response as it came off the wire, and how a case line describes it."""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from hostile_replay.knobs import MiB
from hostile_replay.payloads import envelope_code, strict_json

READ_CAP = 16 * MiB
"""Most bytes of one response the client keeps: a gzip bomb relayed decoded must not take this script down."""


@dataclass(slots=True)
class Reply:
    """One response as the client received it (body as sent on the wire, not decoded)."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    raw_headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    seconds: float = 0.0
    """Until the response was complete, or the connection closed, or the wait ended."""
    closed: bool = False
    """The server closed the connection (raw exchanges)."""
    ended: float = 0.0
    """When the raw exchange stopped reading."""
    cut: str | None = None
    """Why the body broke off, if it did."""
    more: int = 0
    """Further responses on the same connection (raw exchanges)."""

    @property
    def decoded(self) -> bytes:
        if "gzip" not in self.headers.get("content-encoding", ""):
            return self.body
        try:
            return zlib.decompressobj(31).decompress(self.body, READ_CAP)
        except zlib.error:
            return self.body

    @property
    def code(self) -> str | None:
        """The envelope's `code` (`""` when null), or None if the body is not an OpenAI error envelope."""
        return envelope_code(self.decoded)

    def envelope(self, *statuses: int) -> bool:
        return self.status in statuses and self.code is not None

    @property
    def is_stream(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def events(self) -> list[str]:
        text = self.decoded.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        events = []
        for block in text.split("\n\n"):
            data = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
            if data:
                events.append("\n".join(data))
        return events

    @property
    def done(self) -> bool:
        return self.cut is None and bool(self.events) and self.events[-1] == "[DONE]"

    @property
    def error_events(self) -> list[str]:
        return [e for e in self.events if e != "[DONE]" and envelope_code(e.encode()) is not None]

    @property
    def invalid_events(self) -> list[str]:
        invalid = []
        for event in self.events:
            try:
                if event != "[DONE]":
                    strict_json(event)
            except ValueError:
                invalid.append(event)
        return invalid

    def ended_with_error(self) -> bool:
        """A stream ended the way every failure must end one: an error event, then `[DONE]`."""
        return self.status == 200 and self.done and bool(self.error_events) and not self.invalid_events

    def describe(self) -> str:
        if self.status is None:
            how = "closed" if self.closed else "still open"
            return f"no answer, {how} after {self.seconds:.1f} s" + (f" ({self.cut})" if self.cut else "")
        if self.is_stream and self.status == 200:
            events = self.events
            parts = [f"200 stream of {len(events)} events"]
            if self.error_events:
                parts.append(f"error event ({envelope_code(self.error_events[0].encode())})")
            if self.invalid_events:
                parts.append(f"{len(self.invalid_events)} not strict JSON")
            parts.append("[DONE]" if self.done else "no [DONE]")
            text = ", ".join(parts)
        elif self.code is not None:
            text = f"{self.status} envelope ({self.code})"
        else:
            kind = self.headers.get("content-type", "no content-type").split(";")[0]
            text = f"{self.status} {kind} {_snippet(self.decoded)}"
        return text + (f", cut ({self.cut})" if self.cut else "")


def tally(replies: Iterable[Reply]) -> str:
    """Concurrent replies described once per kind, `3 x 502 envelope (...)`."""
    described = Counter(reply.describe() for reply in replies)
    return "; ".join(f"{count} x {text}" for text, count in described.items())


def _snippet(data: bytes, size: int = 40) -> str:
    text = ascii(data[:size].decode("utf-8", errors="replace"))
    return text[:size] + ("..." if len(data) > size or len(text) > size else "")
