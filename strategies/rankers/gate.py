"""The gate every ranked step stands behind: a step that moves, drops, names or quotes documents by its ranker's
ranking acts only where the ranker's margin (its first document's lead over the second, as a share of its lead over
the last) is at least the ranker's gate. Below it the step does nothing and says so (`skipped=margin;
margin=0.070`): where near misses mislead a ranker, its margin is low, and a move or a quote of the wrong document
costs more than it earns. One mechanism for every step, the built-ins and a plugin's alike (`plugin.rank` raises
`BelowGate`, the pipeline keeps the request as the step received it); a request sets its own with `gate=`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from contextlift.strategies.rankers.base import RankerSet, Ranking

# Chosen by scripts/ranker_gates.py (docs/results/ranker-gates: every regime's figures and the command), without a
# model: litm-qa, 10 documents, easy, hard and SQuAD distractors, each as passages and as LangChain's `---`-joined
# chunks of real paragraphs, 45 questions per regime to choose on and 45 others to check. Each gate is the lowest
# margin at which a step acts with a wrong document first in at most 5% of any regime's cases. `client` has none:
# its margin is the same for every request (the order sent is the client's claim, not a score).
GATES: Mapping[str, float] = MappingProxyType({"lexical": 0.74, "minilm": 0.42, "fusion": 0.34, "client": 0.0})
"""Per ranker, the margin below which a ranked step does nothing."""


class BelowGate(Exception):
    """The step's ranker is not sure enough of its first document for the step to act on it."""

    def __init__(self, margin: float | None, gate: float) -> None:
        super().__init__(f"margin {margin} below the gate {gate}")
        self.margin = margin
        self.gate = gate

    def notes(self) -> list[str]:
        """What the step reports: `skipped=margin`, and the margin where there was a ranking of two or more."""
        return ["skipped=margin", *([] if self.margin is None else [f"margin={self.margin:.3f}"])]


def gate_of(ranking: Ranking, asked: float | None, rankers: RankerSet) -> float | None:
    """The gate a step's ranking must pass: the request's (`gate=`), else the operator's for its ranker, else the
    measured one; None where it has none (a ranker that fell back to the client's order, or one that neither a
    measurement nor the operator covers)."""
    if ranking.fallback is not None:
        return None  # the client's order stands: nothing moves on a ranking that is not there
    if asked is not None:
        return asked
    gates = GATES if rankers.gates is None else rankers.gates
    return gates.get(ranking.ranker)


def merged(operator: Mapping[str, float]) -> Mapping[str, float]:
    """The measured gates with the operator's over them (`Settings.ranker_gates`)."""
    return MappingProxyType({**GATES, **operator})


def check(ranking: Ranking, asked: float | None, rankers: RankerSet) -> bool:
    """Whether the step may act on `ranking`; False where no gate covers the ranker (the caller says so).

    Raises:
        BelowGate: the ranking's margin is under its gate (a ranking of one document has no margin: a gate above 0
            stops it too, there being nothing to be sure against).
    """
    gate = gate_of(ranking, asked, rankers)
    if gate is None:
        return ranking.fallback is not None
    margin = ranking.margin()
    if gate > 0 and (margin is None or margin < gate):
        raise BelowGate(margin, gate)
    return True
