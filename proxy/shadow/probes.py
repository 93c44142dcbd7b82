"""Positional probes in shadow evaluation (`shadow_probes`): a sampled request's own documents, with a needle
written into one of them (contextlift.strategies.probes), asked with that document first, in the middle and last, for
`none`, the served pipeline and each candidate, the same probe and positions for each. The answers are scored on
the value alone, so the record is accuracy, not agreement: `contextlift shadow-report` tables it by position and
tests each candidate's lift over `none` as the eval's verdicts do, and `contextlift policy` writes rules from it.

The sink gets no document or needle text from here: the probe's kind, the positions and whether each answer was
right. With capture on, the needle, question, value and answers go into the record's `captured` part.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from contextlift.proxy.observability.metrics import ProxyMetrics
from contextlift.proxy.policy import detected_format
from contextlift.proxy.shadow.case import ShadowAnswer
from contextlift.strategies import ChatRequest, Pipeline
from contextlift.strategies.probes import PlacedProbe, Probe, make_probe, place_probe, probe_correct

NONE = "none"
SERVED = "served"
"""The metrics' label for the served pipeline, whatever it was (a client's header can name any pipeline)."""


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """One probe for one sampled request, and the pipelines it is asked with."""

    probe: Probe
    placed: tuple[PlacedProbe, ...]
    runs: tuple[tuple[str, Pipeline, str], ...]
    """(label, pipeline, metrics label): `none` first, then the served pipeline, then the candidates, each once."""
    format: str

    @property
    def calls(self) -> int:
        """The most upstream calls the probe can make."""
        return len(self.placed) * sum(max(1, pipeline.max_upstream_calls()) for _, pipeline, _ in self.runs)

    def asks(self) -> list[tuple[str, Pipeline, PlacedProbe]]:
        """Every (label, pipeline, placed request) to ask, pipeline by pipeline, positions in order."""
        return [(label, pipeline, placed) for label, pipeline, _ in self.runs for placed in self.placed]


def plan_probe(
    request: ChatRequest,
    served: Pipeline,
    candidates: Sequence[tuple[str, Pipeline]],
    seed: int,
    min_documents: int,
) -> ProbePlan | None:
    """The probe for this request, or None: too few documents, no question found, or nowhere to write a needle."""
    if len(request.documents) < min_documents:
        return None
    probe = make_probe(request, seed)
    if probe is None:
        return None
    placed = place_probe(request, probe)
    if not placed:
        return None
    runs: list[tuple[str, Pipeline, str]] = [(NONE, Pipeline(), NONE)]
    for label, pipeline, metric in ((served.label, served, SERVED), *((lb, p, lb) for lb, p in candidates)):
        if all(label != taken for taken, _, _ in runs):
            runs.append((label, pipeline, metric))
    return ProbePlan(probe, tuple(placed), tuple(runs), detected_format(request))


async def run_probe(
    plan: ProbePlan, ask: Callable[[Pipeline, ChatRequest], Awaitable[ShadowAnswer]]
) -> list[ShadowAnswer]:
    """The answers, in `plan.asks()` order."""
    return [await ask(pipeline, placed.request) for _, pipeline, placed in plan.asks()]


def probe_record(plan: ProbePlan, answers: Sequence[ShadowAnswer]) -> dict[str, Any]:
    """The record's `probe` part: no document, needle or answer text, only positions and scores."""
    rows = []
    for (label, _, placed), answer in zip(plan.asks(), answers, strict=True):
        rows.append({
            "strategy": label,
            "position": placed.position,
            "index": placed.index,
            "correct": answer.error is None and probe_correct(answer.text, plan.probe.value),
            "error": answer.error,
            "calls": answer.calls,
            "tokens": answer.tokens,
            "seconds": round(answer.seconds, 4),
        })  # fmt: skip
    return {
        "kind": plan.probe.kind,
        "format": plan.format,
        "documents": len(plan.placed[0].request.documents),
        "runs": rows,
    }


def captured_probe(plan: ProbePlan, answers: Sequence[ShadowAnswer], blank: Callable[[str], str]) -> dict[str, Any]:
    """What capture adds: the needle, its question and value, and each answer (credentials blanked)."""
    return {
        "needle": plan.probe.needle,
        "question": plan.probe.question,
        "value": plan.probe.value,
        "answers": [blank(a.text) for a in answers],
    }


def observe_probe(metrics: ProxyMetrics, model: str | None, plan: ProbePlan, record: dict[str, Any]) -> None:
    labels = {label: metric for label, _, metric in plan.runs}
    model_label = metrics.model_label(model)
    for row in record["runs"]:
        outcome = "error" if row["error"] else "correct" if row["correct"] else "wrong"
        metrics.shadow_probes.labels(model_label, row["position"], labels[row["strategy"]], outcome).inc()
