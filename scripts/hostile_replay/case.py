"""One hostile case: what it is called, what it expects, how it runs and under which conditions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hostile_replay.context import Ctx, Verdict

CaseRun = Callable[[Ctx], Awaitable[Verdict]]


@dataclass(frozen=True, slots=True)
class Case:
    """A named attack and its expected outcome; `run` sends it and returns the verdict."""

    family: str
    name: str
    expected: str
    """Placeholders `{header}`, `{body}`, `{keepalive}` and `{deadline}` stand for the run's bounds."""
    run: CaseRun
    local_only: bool = False
    """Needs the fake upstream (what it received, or how it misbehaves)."""
    probe: bool = False
    """Measure `/healthz` from a second connection while the case runs; over `knobs.HEALTHZ_LIMIT` is a defect."""
    timeout: float = 20.0
