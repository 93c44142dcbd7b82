"""Finding a request's documents and choosing its pipeline, shared by the routes that apply strategies; and rewriting
a request without calling the upstream, for the callers that send it on themselves (the Responses route, the LiteLLM
guardrail): the selected pipeline's transforms applied to a chat body, written back as the body to send.

A step that calls the upstream itself (an executor such as medoid or recite; a transform such as `pick`) needs the
chat-completions exchange the chat route runs: there it declines, said as `medoid -> none: chat-only`, and the
request goes as it came."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from contextlift.proxy.errors import PayloadTooLarge
from contextlift.proxy.off_loop import off_loop
from contextlift.proxy.policy import Auto, RequestFeatures, detected_format, detected_reading, ranker_margin
from contextlift.proxy.request_log import RequestRecord
from contextlift.proxy.state import ProxyState
from contextlift.strategies import (
    AppliedStep,
    ChatRequest,
    Completion,
    CompletionStream,
    DocumentLimitError,
    Pipeline,
    Role,
    StepContext,
    UpstreamFailure,
    document_order,
    parse_request,
    render_rankings,
)
from contextlift.strategies.pipeline import Step, apply_transforms
from contextlift.strategies.rankers import rank_documents

CHAT_ONLY = "chat-only"
"""Why a step that calls the upstream declines where the caller sends the request on itself."""


async def rewrite(
    state: ProxyState,
    selection: Pipeline | Auto,
    body: dict[str, Any],
    record: RequestRecord,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The chat body `body` after the selected pipeline's transforms, or None where it goes as it came (no step,
    no documents, nothing changed, or a step that calls the upstream). `record` says what was found and what ran,
    as the chat route's does: its `X-Context-*` headers (or the metadata a host reports them as). `headers`: the
    client's, read for `X-Context-Debug: scores`."""
    if isinstance(selection, Auto):
        pipeline, found = await choose_auto(body, state, record)
    elif selection.steps:
        pipeline, found = selection, await documents_of(body, selection, state)
    else:
        return None
    record.documents = len(found.documents)
    record.document_format = found.detection
    record.requested = pipeline
    if not pipeline.steps:
        return None
    if any(calls_upstream(step) for step in pipeline.steps):
        record.applied = (AppliedStep("none", f"{pipeline.label} -> none: {CHAT_ONLY}"),)
        return None
    if pipeline.waits_for_embedder(state.services.ranker_set()):
        await state.embedder.wait()
    applied: list[AppliedStep] = []
    changed = await apply_transforms(pipeline, found, StepContext(_NoCalls(), state.services, applied))
    record.applied = tuple(applied)
    if found.documents:
        record.order = document_order(found.documents, changed.sent_documents)
    if headers is not None and debug_asks(headers, "scores"):
        record.scores = scores_header(record.applied, found)

    def rendered() -> dict[str, Any] | None:
        body = changed.render()
        return None if body == found.render() else body

    return await off_loop(rendered)  # in proportion to the body


def calls_upstream(step: Step) -> bool:
    """Whether a step makes upstream calls of its own (an executor; a transform such as `pick`)."""
    return step.strategy.role is Role.EXECUTOR or step.strategy.max_upstream_calls(step.params) > 0


class _NoCalls:
    """The upstream the transforms see in `rewrite`: none of them calls it (`calls_upstream`); one that did would
    fail its step, never reach a chat endpoint on its own."""

    async def complete(self, body: Any) -> Completion:
        raise UpstreamFailure("no upstream calls from a step that rewrites a request only")

    async def stream(self, body: Any) -> CompletionStream:
        raise UpstreamFailure("no upstream calls from a step that rewrites a request only")


async def choose_auto(body: dict[str, Any], state: ProxyState, record: RequestRecord) -> tuple[Pipeline, ChatRequest]:
    """The policy's pipeline for this request, and the request with its documents found. The policy is read once:
    a reload while the request awaits (detection, ranking) must not give its margins one policy and its choice
    another, which could skip a margin rule."""
    policy = state.policy
    found = await documents_of(body, Pipeline(), state)
    tokenizer = state.tokenizer
    tokens = await off_loop(lambda: tokenizer.count(found.documents_text())) if found.documents else 0
    features = RequestFeatures(
        model=record.model,
        documents=len(found.documents),
        document_tokens=tokens,
        format=detected_format(found),
        reading=detected_reading(found),
        stream=found.stream,
    )
    wanted = policy.margin_rankers(features)
    if wanted:
        features = replace(features, margins=await _margins(wanted, found, state))
    choice = policy.choose(features)
    record.policy = choice.header
    state.metrics.policy_rules.labels(choice.rule).inc()
    return choice.pipeline, found


async def _margins(names: frozenset[str | None], found: ChatRequest, state: ProxyState) -> dict[str | None, float]:
    """The margins a policy's rules read, each from its ranker's ranking of the request's documents (ranked only
    when some rule asks: a policy without margins costs no ranking). A ranker that falls back gives none."""
    margins: dict[str | None, float] = {}
    if len(found.documents) < 2:
        return margins
    rankers = state.services.ranker_set()
    for name in names:
        ranker = rankers.rankers.get(name or rankers.default)
        if ranker is None or ranker.needs_embedder:
            await state.embedder.wait()
        ranking = await rank_documents(found.question, found.documents, rankers, name)
        margin = ranker_margin(ranking.scores) if ranking.fallback is None else None
        if margin is not None:
            margins[name] = margin
    return margins


async def documents_of(body: dict[str, Any], pipeline: Pipeline, state: ProxyState) -> ChatRequest:
    """The request with its documents found, in a worker thread and within the document limits.

    Detection runs only for pipelines that have steps: `none` never reads, let alone changes, a prompt.
    """
    try:
        return await off_loop(
            lambda: parse_request(
                body, limits=state.document_limits, declared=state.declared_formats, shape=pipeline.shape
            )
        )
    except DocumentLimitError as error:
        raise PayloadTooLarge(str(error), param="documents") from None


DEBUG_HEADER = "x-context-debug"
"""What a request asks the response to show besides the usual headers: `scores` (each ranked step's ranking)."""
MAX_SCORES_HEADER = 4096
"""Characters of `X-Context-Scores` at most: a response head stays well under the 8 KiB a proxy in front accepts."""


def debug_asks(headers: Any, what: str) -> bool:
    value = headers.get(DEBUG_HEADER) or ""
    return what in {word.strip().lower() for word in value[:256].split(",")}


def scores_header(steps: Sequence[AppliedStep], found: ChatRequest) -> str:
    """`X-Context-Scores`: the rankings (`strategies.render_rankings`), `none` where no step ranked, bounded."""
    unmovable = found.unmovable.documents if found.unmovable is not None else ()
    rendered = render_rankings(steps, found.documents, unmovable=unmovable) or "none"
    return rendered if len(rendered) <= MAX_SCORES_HEADER else rendered[: MAX_SCORES_HEADER - 3] + "..."
