"""Running a pipeline: transforms in order, then the executor or a single upstream call."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from contextlift.strategies.plugin import (
    AppliedStep,
    Executor,
    ParamValue,
    Role,
    Services,
    StepContext,
    Strategy,
    Transform,
    send_once,
    with_prior_usage,
)
from contextlift.strategies.rankers.base import RankerSet
from contextlift.strategies.rankers.gate import BelowGate
from contextlift.strategies.request import ChatRequest, Document
from contextlift.strategies.upstream import StrategyOutcome, Upstream

_tracer = trace.get_tracer("contextlift.strategies")


@dataclass(frozen=True, slots=True)
class Step:
    """One resolved step of a pipeline: a strategy with typed parameters (defaults filled in)."""

    strategy: Strategy
    params: Mapping[str, ParamValue]
    explicit: tuple[str, ...] = ()
    """Names of the parameters the request set, for reporting the step as it was asked."""

    @property
    def label(self) -> str:
        """The step as written in `X-Context-Strategy`."""
        shown = "".join(f"; {name}={self.params[name]}" for name in self.explicit)
        return f"{self.strategy.name}{shown}"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Transforms followed by at most one executor. Empty means: send the request once, untouched."""

    steps: tuple[Step, ...] = ()

    @property
    def transforms(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.strategy.role is Role.TRANSFORM)

    @property
    def executor(self) -> Step | None:
        return next((s for s in self.steps if s.strategy.role is Role.EXECUTOR), None)

    @property
    def label(self) -> str:
        return ", ".join(s.label for s in self.steps) or "none"

    @property
    def shape(self) -> str | None:
        """The document shape the steps named with `format=`, if any (one, checked at resolution)."""
        return next((str(s.params["format"]) for s in self.steps if "format" in s.params), None)

    @property
    def needs_embedder(self) -> bool:
        """Whether any step may use the in-process embedder (a ranking step counts: its ranker may be MiniLM)."""
        return any(s.strategy.needs_embedder or s.strategy.ranks for s in self.steps)

    def waits_for_embedder(self, rankers: RankerSet) -> bool:
        """Whether the pipeline uses the in-process embedder with these rankers: a step that needs it, or a
        ranking step whose ranker (named, else the default) does."""
        for step in self.steps:
            if step.strategy.needs_embedder:
                return True
            if step.strategy.ranks:
                name = str(step.params.get("ranker") or rankers.default)
                ranker = rankers.rankers.get(name)
                if ranker is None or ranker.needs_embedder:
                    return True
        return False

    @property
    def streams_directly(self) -> bool:
        executor = self.executor
        return executor is None or executor.strategy.streams_directly

    @property
    def prompt_copies(self) -> int:
        """How many times over each call sends the prompt, at most (a `repeat` step doubles it)."""
        copies = 1
        for step in self.steps:
            copies *= step.strategy.prompt_copies
        return copies

    def max_upstream_calls(self) -> int:
        """The most upstream calls the pipeline makes for one request, before retries: the executor's (else one),
        and those a transform makes before it (`pick`'s)."""
        executor = self.executor
        calls = executor.strategy.max_upstream_calls(executor.params) if executor else 1
        return calls + sum(s.strategy.max_upstream_calls(s.params) for s in self.transforms)

    def upstream_calls(self, prompt_tokens: int) -> int:
        """The upstream calls the pipeline makes for a prompt of `prompt_tokens`, before retries: what a cost estimate
        counts (`Strategy.upstream_calls`), at most `max_upstream_calls`."""
        executor = self.executor
        calls = executor.strategy.upstream_calls(executor.params, prompt_tokens) if executor else 1
        return calls + sum(s.strategy.upstream_calls(s.params, prompt_tokens) for s in self.transforms)


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """The outcome of a pipeline, with the steps that ran."""

    outcome: StrategyOutcome
    steps: tuple[AppliedStep, ...]
    request: ChatRequest
    """The request after all transforms."""

    @property
    def applied(self) -> str:
        """The steps as the `X-Context-Strategy` response header reports them."""
        return render_applied(self.steps)


def render_applied(steps: Sequence[AppliedStep]) -> str:
    """`filter; dropped=3, medoid; k=5; agreement=4/5`, or `none` when no step ran."""
    return ", ".join(step.render() for step in steps) or "none"


MAX_SCORED = 32
"""Documents each ranked step lists with their scores before `...+N`: the `X-Context-Scores` header stays about a
kilobyte per step whatever the request carries."""


def rankings_of(
    steps: Sequence[AppliedStep], found: Sequence[Document], *, unmovable: Sequence[Document] = ()
) -> list[dict[str, Any]]:
    """Each ranked step's ranking: the step, the ranker, its margin (or why it fell back), and every unit it scored,
    best first, with its rank, its score, its place among those ranked, the client's number for it (`document`;
    None for a unit the client did not number) and, for a unit of a context read but not moved (`unmovable`, the
    request's `unmovable.documents`: `excerpt` and `focus` rank them), its place in that context (`unit`)."""
    number_of = {id(document): number for number, document in enumerate(found, start=1)}
    unit_of = {id(unit): number for number, unit in enumerate(unmovable, start=1)}
    return [
        {
            "step": step.label,
            "name": step.name,
            "ranker": ranking.ranker,
            "fallback": ranking.fallback,
            "margin": ranking.margin(),
            "documents": [
                {
                    "rank": rank,
                    "document": number_of.get(id(step.ranked[i])),
                    "unit": unit_of.get(id(step.ranked[i])),
                    "place": i + 1,
                    "score": ranking.scores[i],
                }
                for rank, i in enumerate(ranking.order(), start=1)
            ],
        }
        for step in steps
        if (ranking := step.ranking) is not None
    ]


def render_rankings(
    steps: Sequence[AppliedStep], found: Sequence[Document], *, unmovable: Sequence[Document] = ()
) -> str | None:
    """`rankings_of` as `X-Context-Scores` says it: `reorder; ranker=lexical; margin=0.412: 3=2.731, 1=1.204, 2=0`,
    the client's document numbers (1 for its first) with their scores, steps joined by ` | `; `unit2` for the second
    unit of a context read but not moved (`none: ambiguous-chunks`), `#k` for a document a step wrote, the k-th it
    ranked; a ranker that fell back says so (`fallback=no-embedder`). None when no step ranked."""
    rendered = []
    for ranking in rankings_of(steps, found, unmovable=unmovable):
        head = f"{ranking['name']}; ranker={ranking['ranker']}"
        if ranking["fallback"] is not None:
            rendered.append(f"{head}; fallback={ranking['fallback']}")
            continue
        if ranking["margin"] is not None:
            head += f"; margin={ranking['margin']:.3f}"
        scored = ranking["documents"]
        entries = [f"{_scored_name(d)}={d['score']:.4g}" for d in scored[:MAX_SCORED]]
        if len(scored) > MAX_SCORED:
            entries.append(f"...+{len(scored) - MAX_SCORED}")
        rendered.append(f"{head}: {', '.join(entries)}")
    return " | ".join(rendered) or None


def _scored_name(scored: Mapping[str, Any]) -> str:
    if scored["document"] is not None:
        return str(scored["document"])
    return f"unit{scored['unit']}" if scored["unit"] is not None else f"#{scored['place']}"


async def run_pipeline(
    pipeline: Pipeline,
    request: ChatRequest,
    upstream: Upstream,
    services: Services | None = None,
    *,
    applied: list[AppliedStep] | None = None,
) -> PipelineResult:
    """Apply the transforms, then the executor (or one plain call), and report what ran.

    Steps that need documents are skipped for requests without any; an executor skipped that way leaves a
    single plain call in its place. Each step that runs gets its own OpenTelemetry span.

    Args:
        applied: where the steps are noted as they run: a caller that passes a list still knows what ran when
            the pipeline raises (an upstream that failed after a step had rewritten the request).
    """
    context = StepContext(upstream, services or Services(), [] if applied is None else applied)
    request = await apply_transforms(pipeline, request, context)
    executor = pipeline.executor
    if executor is not None and executor.strategy.runs_on(request):
        assert isinstance(executor.strategy, Executor)
        context.applied.append(AppliedStep(executor.strategy.name, executor.label))
        with _step_span(executor, request, context.services), _gated(context) as below:
            outcome = await executor.strategy.execute(request, executor.params, context)
        if below:
            outcome = await send_once(request, upstream)  # it ranked before calling, and stopped at its gate
    else:
        outcome = await send_once(request, upstream)
    if context.prior_calls:
        outcome = with_prior_usage(outcome, context.prior_calls)
    return PipelineResult(outcome, tuple(context.applied), request)


async def apply_transforms(pipeline: Pipeline, request: ChatRequest, context: StepContext) -> ChatRequest:
    """The request after the pipeline's transforms, each noted in `context.applied` as it runs; steps that need
    documents are skipped for a request without any. A move where the request proves no boundaries is noted with
    what ran in its place (`_in_place_of_a_move`), the operator's fallback once per request."""
    fallback = context.services.unproven_fallback
    # A pipeline that runs the fallback's step itself gets it once, where it asked for it, not twice.
    fell_back = fallback is not None and any(step.strategy is fallback[0] for step in pipeline.transforms)
    for step in pipeline.transforms:
        assert isinstance(step.strategy, Transform)
        if not step.strategy.runs_on(request):
            if step.strategy.moves and request.unmovable is not None:
                request = await _in_place_of_a_move(step, request, context, fallback=not fell_back)
                fell_back = True
            continue
        context.applied.append(AppliedStep(step.strategy.name, step.label, explicit=step.explicit))
        with _step_span(step, request, context.services), _gated(context):
            request = await step.strategy.transform(request, step.params, context)
    return request


async def _in_place_of_a_move(step: Step, request: ChatRequest, context: StepContext, *, fallback: bool) -> ChatRequest:
    """A move asked where the request does not prove its documents' boundaries: the operator's step that adds
    runs instead (`reorder -> focus: unproven-boundaries`), or nothing does (`reorder -> none: ...`; so for a
    later move, once the fallback has added its text)."""
    reason = request.detection.removeprefix("none: ")
    step_in_place = context.services.unproven_fallback if fallback else None
    if step_in_place is None:
        context.applied.append(AppliedStep("none", f"{step.label} -> none: {reason}"))
        return request
    strategy, params = step_in_place
    context.applied.append(AppliedStep(strategy.name, f"{step.label} -> {strategy.name}: {reason}"))
    with _step_span(Step(strategy, params), request, context.services), _gated(context):
        return await strategy.transform(request, params, context)
    return request  # its ranker stopped at the gate


@contextmanager
def _gated(context: StepContext) -> Iterator[list[bool]]:
    """Where the running step's ranking stops at its gate (`BelowGate`, raised by `plugin.rank`): the step's work
    is dropped, the request goes on as the step received it, and the step says why. The list it yields holds True
    once that happened."""
    below: list[bool] = []
    try:
        yield below
    except BelowGate as stopped:
        for fact in stopped.notes():
            context.note(fact)
        below.append(True)


@contextmanager
def _step_span(step: Step, request: ChatRequest, services: Services) -> Iterator[None]:
    started = time.perf_counter()
    with _tracer.start_as_current_span(f"strategy {step.strategy.name}") as span:
        span.set_attribute("contextlift.strategy.name", step.strategy.name)
        span.set_attribute("contextlift.strategy.role", step.strategy.role.value)
        span.set_attribute("contextlift.strategy.step", step.label)
        span.set_attribute("contextlift.documents", len(request.documents))
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            span.set_attribute("contextlift.strategy.duration_ms", round(seconds * 1000, 2))
            if services.observe_step is not None:
                services.observe_step(step.strategy.name, seconds)
