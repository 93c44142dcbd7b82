"""Running a pipeline: transforms in order, then the executor or a single upstream call."""

from __future__ import annotations

from dataclasses import dataclass, field

from strategies.registry import Executor, Pipeline, Transform
from strategies.request import ChatRequest
from strategies.upstream import Completion, CompletionStream, Upstream

StrategyOutcome = Completion | CompletionStream
"""What the client gets: a whole completion, or an open stream to relay."""


@dataclass(slots=True)
class StepContext:
    """What a step may use while it runs, and where it reports what it actually did."""

    upstream: Upstream
    applied: list[str] = field(default_factory=list)
    """Labels of the steps that ran, in order, as reported in the `X-Context-Strategy` response header."""

    def fall_back(self, reason: str) -> None:
        """Mark the step now running as having fallen back to a plain call, and why."""
        if self.applied:
            self.applied[-1] = f"{self.applied[-1]}; fallback={reason}"


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """The outcome of a pipeline, with the label of what was applied."""

    outcome: StrategyOutcome
    applied: str
    request: ChatRequest
    """The request after all transforms."""


async def send_once(request: ChatRequest, upstream: Upstream) -> StrategyOutcome:
    """Send the request as rendered, once, streamed if the client asked for a stream."""
    body = request.render()
    if request.stream:
        return await upstream.stream(body)
    return await upstream.complete(body)


async def run_pipeline(pipeline: Pipeline, request: ChatRequest, upstream: Upstream) -> PipelineResult:
    """Apply the transforms, then the executor (or one plain call), and report what ran.

    Steps that need documents are skipped for requests without any; an executor skipped that way leaves a
    single plain call in its place.
    """
    context = StepContext(upstream)
    for step in pipeline.transforms:
        assert isinstance(step.strategy, Transform)
        if step.strategy.needs_documents and not request.documents:
            continue
        context.applied.append(step.label)
        request = await step.strategy.transform(request, step.params, context)
    executor = pipeline.executor
    if executor is not None and (request.documents or not executor.strategy.needs_documents):
        assert isinstance(executor.strategy, Executor)
        context.applied.append(executor.label)
        outcome = await executor.strategy.execute(request, executor.params, context)
    else:
        outcome = await send_once(request, upstream)
    return PipelineResult(outcome, ", ".join(context.applied) or "none", request)
