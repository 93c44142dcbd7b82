"""What became of every drawn sample, said where an operator looks: a `shadow-tally` line in the sink (what
`contextlift shadow-report` leads with) and a log line, both rate-limited. Without it a sample dropped for the
budget left no trace but a metric, and the report counted only what was evaluated.

A tally is cumulative for one process (its `run`): the report keeps each run's latest and adds the runs up, so
replicas sharing a folder and restarts appending to one sink are counted once each."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

log = structlog.get_logger("contextlift.shadow")

KIND = "shadow-tally"
"""A sink line's `kind` for a tally; records of samples have none."""
DROPPED = (
    "skipped-no-key",
    "not-kept",
    "dropped-queue",
    "dropped-budget",
    "not-served",
    "no-documents",
    "failed",
    "sink-failed",
    "abandoned",
)
"""The outcomes other than `evaluated`, in the order the report lists them."""
WRITE_SECONDS = 5.0
"""How often a changed tally is written to the sink: a report run minutes after the traffic is exact, and an idle
proxy writes nothing."""
LOG_SECONDS = 60.0
"""How often a changed tally is logged; the first sample lost for each reason is logged at once."""


@dataclass(frozen=True, slots=True)
class TallyLimits:
    """The settings that explain a drop, written with each tally so the report can say why."""

    calls_per_minute: int
    tokens_per_minute: int
    queue: int


class ShadowTally:
    """Counts by outcome since the process started, and the largest number of calls one sample planned."""

    def __init__(self, limits: TallyLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.run = secrets.token_hex(6)
        self.limits = limits
        self.sampled = 0
        self.outcomes: Counter[str] = Counter()
        self.planned_calls = 0
        self._clock = clock
        self._written = self._logged = (-1, -1)
        self._last_log = clock()

    def draw(self) -> None:
        self.sampled += 1

    def count(self, outcome: str, samples: int = 1) -> None:
        first = not self.outcomes[outcome]
        self.outcomes[outcome] += samples
        if outcome != "evaluated" and first:
            log.warning("shadow sample lost", outcome=outcome, why=why(outcome, self.limits, self.planned_calls))

    @property
    def pending(self) -> int:
        """Samples drawn whose outcome is not known yet: queued, being evaluated, or their response not yet sent."""
        return self.sampled - self.outcomes.total()

    def plan(self, calls: int) -> None:
        self.planned_calls = max(self.planned_calls, calls)

    def record(self) -> dict[str, Any] | None:
        """The tally as a sink line, or None when nothing changed since the last one."""
        state = (self.sampled, self.outcomes.total())
        if state == self._written:
            return None
        self._written = state
        return {
            "kind": KIND,
            "run": self.run,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "sampled": self.sampled,
            "outcomes": dict(self.outcomes),
            "planned_calls": self.planned_calls,
            "limits": {
                "calls_per_minute": self.limits.calls_per_minute,
                "tokens_per_minute": self.limits.tokens_per_minute,
                "queue": self.limits.queue,
            },
        }

    def log_if_due(self, *, now: bool = False) -> None:
        """Log the tally if it changed and LOG_SECONDS have passed since the last line (`now`: at shutdown)."""
        state = (self.sampled, self.outcomes.total())
        if state == self._logged or not (now or self._clock() - self._last_log >= LOG_SECONDS):
            return
        self._logged, self._last_log = state, self._clock()
        lost = {k: v for k, v in self.outcomes.items() if k != "evaluated"}
        (log.warning if lost else log.info)(
            "shadow samples",
            sampled=self.sampled,
            evaluated=self.outcomes["evaluated"],
            pending=self.pending,
            **{outcome.replace("-", "_"): count for outcome, count in lost.items()},
        )


def why(outcome: str, limits: TallyLimits | dict[str, Any], planned_calls: int) -> str:
    """One line saying why a sample ended as `outcome` and what to change, from the limits in force."""
    if isinstance(limits, TallyLimits):
        limits = {"calls_per_minute": limits.calls_per_minute, "tokens_per_minute": limits.tokens_per_minute,
                  "queue": limits.queue}  # fmt: skip
    calls = int(limits.get("calls_per_minute", 0))
    if outcome == "dropped-budget":
        fits = f", so {calls // planned_calls} fit a minute" if planned_calls else ""
        return (f"over the shadow budget: a sample plans up to {planned_calls} upstream calls against "
                f"shadow_calls_per_minute {calls}{fits} (and shadow_tokens_per_minute "
                f"{int(limits.get('tokens_per_minute', 0))}); raise them or lower shadow_rate")  # fmt: skip
    return {
        "skipped-no-key": "no upstream_api_key, and shadow_use_client_key off: set either to sample",
        "not-kept": "the body was over shadow_max_body_bytes, or asked for several choices (n > 1): nothing was kept",
        "dropped-queue": f"the queue of samples waiting was full (shadow_queue {int(limits.get('queue', 0))})",
        "not-served": "the served response was an error or had no text to compare",
        "no-documents": "no documents were found in the request as shadow parsed it",
        "failed": "the evaluation failed (the proxy log has the error)",
        "sink-failed": "the record could not be written to the sink (the proxy log has the error)",
        "abandoned": "the proxy shut down before it was evaluated (shutdown cancels shadow work, never waits for it)",
    }.get(outcome, outcome)
