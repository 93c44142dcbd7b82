"""What one client request's upstream calls came to: how many, which failed, retries, usage, time waited."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from contextlift.proxy.errors import UpstreamError, UpstreamStatusError
from contextlift.strategies import add_usage


@dataclass(slots=True)
class CallLedger:
    """Counts of one client request's upstream calls, for its response headers and its log line."""

    calls: int = 0
    """HTTP requests sent upstream, retries included."""
    failure_codes: list[str] = field(default_factory=list)
    retries: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    _in_flight: int = 0
    _busy_since: float = 0.0
    busy_seconds: float = 0.0
    """Wall-clock time with at least one upstream call in flight (our own reading and relaying included)."""
    _waits: list[tuple[float, float]] = field(default_factory=list)

    def started(self) -> None:
        self.calls += 1
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1

    def finished(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self.busy_seconds += time.perf_counter() - self._busy_since

    def waited(self, start: float, end: float) -> None:
        """The upstream held one of this request's calls from `start` to `end` (`time.perf_counter()`): for its
        answer's head, or for the next piece of its body (see `contextlift.proxy.upstream.transport.TimedTransport`)."""
        self._waits.append((start, end))

    def waited_seconds(self) -> float:
        """Wall-clock time in which at least one call was waiting on the upstream (overlapping waits of a fan-out
        counted once): the part of the latency the upstream, not the proxy, spent."""
        total, reach = 0.0, float("-inf")
        for start, end in sorted(self._waits):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total

    def failed(self, error: UpstreamError) -> None:
        code = f"status_{error.upstream_status}" if isinstance(error, UpstreamStatusError) else error.code
        self.failure_codes.append(code)

    def failures_summary(self) -> str:
        """`status_503=2, upstream_timeout=1`, or `none`."""
        counts: dict[str, int] = {}
        for code in self.failure_codes:
            counts[code] = counts.get(code, 0) + 1
        return ", ".join(f"{code}={count}" for code, count in counts.items()) or "none"

    def add_usage(self, usage: Any) -> None:
        add_usage(self.usage, usage)
