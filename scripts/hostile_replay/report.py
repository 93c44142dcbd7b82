"""What the run prints: one line per case, the families not run, and the total the exit status follows."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field

from hostile_replay.case import Case
from hostile_replay.knobs import Knobs


def expected_text(case: Case, knobs: Knobs) -> str:
    """The case's expectation with the bounds of this run written in (`{header}` becomes `3.5 s`)."""
    text = case.expected
    for name, seconds in dataclasses.asdict(knobs.bounds).items():
        text = text.replace(f"{{{name}}}", f"{seconds:g} s")
    return text


@dataclass
class Report:
    """Counts the verdicts as they are printed, and the worst `/healthz` latency of the probed cases."""

    started: float = field(default_factory=time.monotonic)
    ok: int = 0
    defects: int = 0
    worst: tuple[float, str] = (0.0, "no probed case")
    skipped: Counter[str] = field(default_factory=Counter)

    def skip(self, case: Case) -> None:
        self.skipped[case.family] += 1

    def record(self, case: Case, expected: str, ok: bool, observed: str, healthz: float | None) -> None:
        if healthz is not None and healthz >= self.worst[0]:
            self.worst = (healthz, f"{case.family} {case.name}")
        self.ok += ok
        self.defects += not ok
        fields = (f"{case.family:<9}", f"{case.name:<52}", f"expected={expected}", f"observed={observed}")
        print("  ".join((*fields, "OK" if ok else "DEFECT")), flush=True)

    def finish(self) -> int:
        """Prints what was not run and the total; returns the exit status (1 if any case is a DEFECT)."""
        if self.skipped:
            families = ", ".join(f"{family} ({count})" for family, count in self.skipped.items())
            print(f"not run against a deployment (they need the local fake upstream): {families}")
        total = self.ok + self.defects
        print(f"hostile: {total} cases, {self.ok} OK, {self.defects} DEFECT, worst /healthz {self.worst[0]:.2f} s "
              f"during {self.worst[1]}, {time.monotonic() - self.started:.0f} s")  # fmt: skip
        return 1 if self.defects else 0
