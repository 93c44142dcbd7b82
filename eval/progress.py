"""What a run has done and has left, said on standard error from its first answer: the requests answered of the
total, how many came from the cache, the errors so far, the time spent and the time left.

On a terminal the line is a bar redrawn in place at every answer. Elsewhere (a CI log, a file) it is a line at the
first answer, at each further tenth of the work or after `EVERY_S` without one, and at the last: a run of hours
writes a line a minute, not one per request.

The time left weighs each job by its estimated seconds (`eval.timing`: 0 for one the cache answers) and scales what
is left by how long the answers so far took against their estimate: until the first answer it is the estimate
itself, after it the upstream's own pace on this run. Without an estimate, every request sent weighs alike.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from contextlift.eval.timing import duration

EVERY_S = 60.0
"""Longest a log goes without a progress line while answers come (a terminal's bar moves at every answer)."""
_BAR = 30


class Progress:
    """Counts answers as they come and writes the progress line (see the module's docstring)."""

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        *,
        label: str = "",
        estimates: Sequence[float] | None = None,
        left: bool = True,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`total` jobs; `estimates`: each job's seconds, by its index in the work; `label`: what the line is of
        (the timing requests); `left`: whether the line says the time left (the timing phase has its own bound);
        `stream`: standard error unless given."""
        self.total, self.done, self.cached, self.errors = total, 0, 0, 0
        self._stream = stream or sys.stderr
        self._label = f"{label}: " if label else ""
        self._estimates = list(estimates) if estimates is not None else None
        self._left_estimate = sum(self._estimates) if self._estimates is not None else 0.0
        self._answered_estimate = 0.0
        self._says_left = left
        self._every_s = every_s
        self._clock = clock
        self._started = clock()
        self._tty = self._stream.isatty()
        self._written_at = self._started
        self._written_tenth = -1
        self._width = 0

    def advance(self, job: int, *, cached: bool, error: bool) -> None:
        """Job number `job` (its index in the work) was answered: from the cache, or with an error."""
        self.done += 1
        self.cached += cached
        self.errors += error
        if self._estimates is not None and 0 <= job < len(self._estimates):
            self._left_estimate -= self._estimates[job]
            if not cached:  # an answer the cache gave took no time: it says nothing of the pace
                self._answered_estimate += self._estimates[job]
        now = self._clock()
        tenth = self.done * 10 // max(self.total, 1)
        last = self.done == self.total
        if self._tty:
            line = self._bar(now)
            self._stream.write("\r" + line.ljust(self._width) + ("\n" if last else ""))
            self._width = len(line)
        elif self.done == 1 or last or tenth != self._written_tenth or now - self._written_at >= self._every_s:
            self._stream.write(f"contextlift eval: {self._label}{self._counts(now)}\n")
        else:
            return
        self._written_at, self._written_tenth = now, tenth
        self._stream.flush()

    def end(self, why: str) -> None:
        """Ends the line before the work is done (the timing phase at its bound), saying why."""
        self._stream.write(("\n" if self._tty and self.done else "") + f"contextlift eval: {self._label}{why}\n")
        self._stream.flush()

    def seconds_left(self) -> float | None:
        """The time left, as the line says it; None while nothing tells it (no estimate, no request answered)."""
        elapsed = self._clock() - self._started
        if self._estimates is not None:
            left = max(self._left_estimate, 0.0)
            return left * elapsed / self._answered_estimate if self._answered_estimate > 0 else left
        sent = self.done - self.cached
        return elapsed / sent * (self.total - self.done) if sent else None

    def _counts(self, now: float) -> str:
        cached = f" ({self.cached} cached)" if self.cached else ""
        return f"{self.done} of {self.total} requests{cached}, errors {self.errors}, {self._times(now)}"

    def _bar(self, now: float) -> str:
        filled = _BAR * self.done // max(self.total, 1)
        cached = f" cached {self.cached}" if self.cached else ""
        return (
            f"{self._label}[{'#' * filled}{'.' * (_BAR - filled)}] {self.done}/{self.total}{cached} "
            f"errors {self.errors}, {self._times(now)}"
        )

    def _times(self, now: float) -> str:
        spent = f"{duration(now - self._started)} in"
        if not self._says_left or self.done == self.total:
            return spent
        left = self.seconds_left()
        return f"{spent}, " + ("time left unknown" if left is None else f"about {duration(left)} left")
