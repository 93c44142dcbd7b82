"""Running a pipeline: transforms in order, then the executor or a single upstream call."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from opentelemetry import trace

from strategies.embedder import Embedder
from strategies.registry import Executor, Pipeline, Step, Transform
from strategies.request import ChatRequest
from strategies.tokens import TiktokenTokenizer, Tokenizer
from strategies.upstream import Completion, CompletionStream, Upstream

_tracer = trace.get_tracer("contextlift.strategies")

StrategyOutcome = Completion | CompletionStream
"""What the client gets: a whole completion, or an open stream to relay."""


@dataclass(frozen=True, slots=True)
class Services:
    """The heavy helpers strategies share, loaded once at start-up by whoever builds the app."""

    embedder: Embedder | None = None
    tokenizer: Tokenizer = field(default_factory=TiktokenTokenizer)
    seed: int | None = None
    """Default seed for strategies that draw random permutations; None: a fresh draw per request."""
    observe_step: Callable[[str, float], None] | None = None
    """Told each step's strategy name and duration in seconds (the proxy feeds its metrics with it)."""

    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise RuntimeError("this strategy needs an embedder, and none was loaded")
        return self.embedder


@dataclass(slots=True)
class StepContext:
    """What a step may use while it runs, and where it reports what it actually did."""

    upstream: Upstream
    services: Services = field(default_factory=Services)
    applied: list[str] = field(default_factory=list)
    """Labels of the steps that ran, in order, as reported in the `X-Context-Strategy` response header."""

    def note(self, fact: str) -> None:
        """Add a fact (`fallback=empty-recitation`, `failed=2`) to the label of the step now running."""
        if self.applied:
            self.applied[-1] = f"{self.applied[-1]}; {fact}"

    def fall_back(self, reason: str) -> None:
        """Mark the step now running as having fallen back to a plain call, and why."""
        self.note(f"fallback={reason}")


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """The outcome of a pipeline, with the label of what was applied."""

    outcome: StrategyOutcome
    applied: str
    request: ChatRequest
    """The request after all transforms."""


async def send_once(request: ChatRequest, upstream: Upstream) -> StrategyOutcome:
    """Send the request as rendered, once, streamed if the client asked for a stream."""
    # Rendering documents is work in proportion to them, so not on the event loop; without any it is a copy.
    body = await anyio.to_thread.run_sync(request.render) if request.documents else request.render()
    if request.stream:
        return await upstream.stream(body)
    return await upstream.complete(body)


async def run_pipeline(
    pipeline: Pipeline, request: ChatRequest, upstream: Upstream, services: Services | None = None
) -> PipelineResult:
    """Apply the transforms, then the executor (or one plain call), and report what ran.

    Steps that need documents are skipped for requests without any; an executor skipped that way leaves a
    single plain call in its place. Each step that runs gets its own OpenTelemetry span.
    """
    context = StepContext(upstream, services or Services())
    for step in pipeline.transforms:
        assert isinstance(step.strategy, Transform)
        if step.strategy.needs_documents and not request.documents:
            continue
        context.applied.append(step.label)
        with _step_span(step, request, context.services):
            request = await step.strategy.transform(request, step.params, context)
    executor = pipeline.executor
    if executor is not None and (request.documents or not executor.strategy.needs_documents):
        assert isinstance(executor.strategy, Executor)
        context.applied.append(executor.label)
        with _step_span(executor, request, context.services):
            outcome = await executor.strategy.execute(request, executor.params, context)
    else:
        outcome = await send_once(request, upstream)
    return PipelineResult(outcome, ", ".join(context.applied) or "none", request)


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
