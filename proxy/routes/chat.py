"""`POST /v1/chat/completions`: the body read and checked, the documents found, the selected strategies run, and
the answer relayed (whole, streamed through, or streamed once every call is in).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any, TypeVar

import structlog
from litestar import Request, Response, post
from litestar.response import Stream

from contextlift.proxy import json_text
from contextlift.proxy.edge.intake import check_chat_body, parse_json_object, reject_upstream_overrides, require_json
from contextlift.proxy.errors import (
    InvalidRequest,
    InvalidStrategy,
    NotReady,
    ShuttingDown,
    UpstreamProtocolError,
)
from contextlift.proxy.off_loop import LARGE_BODY, reading
from contextlift.proxy.policy import Auto
from contextlift.proxy.request_log import CLIENT_CLOSED_REQUEST
from contextlift.proxy.rewrite import choose_auto, debug_asks, documents_of, scores_header
from contextlift.proxy.routes.chat_streams import completion_frames, relay_stream, stream_when_done
from contextlift.proxy.routes.exchange import Exchange
from contextlift.proxy.routes.stream_usage import StreamUsage
from contextlift.proxy.shadow.case import ShadowCase
from contextlift.proxy.state import STRATEGY_FIELD, ProxyState
from contextlift.proxy.upstream.client import Verbatim
from contextlift.proxy.upstream.key_guard import KeyGuard
from contextlift.strategies import (
    AppliedStep,
    ChatRequest,
    Completion,
    DocumentOrder,
    Pipeline,
    PipelineResult,
    UpstreamFailure,
    document_order,
    run_pipeline,
)

T = TypeVar("T")
log = structlog.get_logger("contextlift")
_STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class ClientDisconnected(Exception):
    """The client went away before its response was ready."""


CHAT_ROUTE_NAME = "chat_completions"
"""The route's name in the app: `ProxyApp` serves a POST to it directly, with the handler litestar registered."""


@post("/v1/chat/completions", status_code=200, name=CHAT_ROUTE_NAME)
async def chat_completions(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    """OpenAI chat completions, with the strategies named in `X-Context-Strategy` applied."""
    exchange = Exchange.enter(request)
    state, record = exchange.state, exchange.record
    if state.shutting_down:
        raise NotReady("the proxy is shutting down", headers={"retry-after": "1"})
    require_json(request.headers.get("content-type"))
    raw = await request.body()
    body = await reading(parse_json_object, raw)
    check_chat_body(body)
    reject_upstream_overrides(request.headers, body)
    record.model = body.get("model") if isinstance(body.get("model"), str) else None
    # The body field selecting strategies is consumed below: the client's bytes then no longer match.
    verbatim = Verbatim(raw, body) if STRATEGY_FIELD not in body else None
    try:
        selection = state.select_pipeline(request.headers, body)
    except InvalidStrategy:
        record.document_format = "none: invalid-strategy"  # a strategy was asked for: not `not-requested`
        raise
    if isinstance(selection, Auto):
        try:  # a margin rule ranks the documents, a remote call: a client that leaves meanwhile cancels it
            pipeline, found = await _unless_disconnected(exchange, choose_auto(body, state, record))
        except ClientDisconnected:
            record.finish(CLIENT_CLOSED_REQUEST)
            return Response(b"", status_code=CLIENT_CLOSED_REQUEST)
        chat = found if pipeline.steps else ChatRequest(body=body)
    else:
        pipeline = selection
        found = chat = await documents_of(body, pipeline, state) if pipeline.steps else ChatRequest(body=body)
    record.documents = len(found.documents)
    record.document_format = found.detection
    record.requested = pipeline
    _check_choices(pipeline, chat)
    if state.shadow is not None and state.shadow.sampled():
        shape = None if isinstance(selection, Auto) else pipeline.shape
        record.shadow = _shadow_case(request, raw, body, shape, pipeline, state)
        if record.shadow is None:
            state.shadow.not_kept()
    if pipeline.waits_for_embedder(state.services.ranker_set()):
        await state.embedder.wait()  # loads it if this is the first request that needs it
    upstream = exchange.upstream(
        budget=state.settings.max_upstream_calls,
        retry_budget=state.settings.retry_budget,
        verbatim=verbatim,
        large=len(raw) > LARGE_BODY,
    )
    guard = upstream.guard
    applied: list[AppliedStep] = []
    work = run_pipeline(pipeline, chat, upstream, state.services, applied=applied)
    if chat.stream and chat.documents and not pipeline.streams_directly:
        # Nothing to relay until every answer is in: start the stream now and keep it alive meanwhile.
        record.planned_calls = pipeline.max_upstream_calls()
        return Stream(stream_when_done(work, exchange, chat.body, guard), media_type="text/event-stream",
                      headers=_STREAM_HEADERS)  # fmt: skip
    try:
        result = await _unless_disconnected(exchange, work)
    except ClientDisconnected:
        record.finish(CLIENT_CLOSED_REQUEST)
        return Response(b"", status_code=CLIENT_CLOSED_REQUEST)
    except Exception as error:
        record.applied = tuple(applied)
        if isinstance(error, UpstreamFailure):
            record.error = getattr(error, "code", type(error).__name__)
        raise
    record.applied = result.steps
    if record.shadow is not None:
        record.shadow.served_margin = next((s.ranking.margin() for s in result.steps if s.ranking is not None), None)
    if chat.documents:
        record.order = _order_sent(pipeline, chat, result)
    if debug_asks(request.headers, "scores"):
        # Asked for, whatever was found: a step ranks the units of a context it may not move (`excerpt`) too.
        record.scores = scores_header(result.steps, chat)
    outcome = result.outcome
    if record.shadow is not None and isinstance(outcome, Completion):
        record.shadow.served_completion(outcome)
    headers = guard.blank_headers(outcome.headers)
    if isinstance(outcome, Completion) and not chat.stream:
        return Response(_completion_bytes(outcome, pipeline, guard), media_type="application/json", headers=headers)
    if isinstance(outcome, Completion):
        frames = completion_frames(outcome, chat.body, guard)
        return Stream(frames, media_type="text/event-stream", headers={**headers, **_STREAM_HEADERS})
    usage = StreamUsage(result.request.render(), state.tokenizer, getattr(outcome, "prior_usage", None))
    return Stream(
        relay_stream(outcome, exchange, usage, guard),
        media_type="text/event-stream",
        headers={**headers, **_STREAM_HEADERS},
    )


def _completion_bytes(outcome: Completion, pipeline: Pipeline, guard: KeyGuard) -> bytes:
    """The answer's body as the client gets it: the upstream's own bytes where no executor ran (only one sends
    the upstream's completion on rebuilt), else the completion serialised."""
    if outcome.raw is not None and pipeline.executor is None:
        return outcome.raw
    try:
        return guard.blank(json_text.dumps(outcome.body).encode())
    except ValueError:
        raise UpstreamProtocolError("the upstream's answer cannot be written as JSON") from None


def _shadow_case(
    request: Request[Any, Any, Any],
    raw: bytes,
    body: dict[str, Any],
    shape: str | None,
    pipeline: Pipeline,
    state: ProxyState,
) -> ShadowCase | None:
    """What shadow evaluation keeps of a sampled request, or None when it keeps nothing of it: a body past
    `shadow_max_body_bytes` (the queue holds bodies outside the memory budget), or one asking for several
    choices. Nothing here reads the prompt: the shadow worker parses the body's bytes again and finds its
    documents, after the response (a queued case costs its body's size, not its parsed objects')."""
    if len(raw) > state.settings.shadow_max_body_bytes or body.get("n") not in (None, 1):
        return None
    model = body.get("model")
    return ShadowCase(
        raw, pipeline, dict(request.headers), request.url.query, model if isinstance(model, str) else None, shape
    )


def _order_sent(pipeline: Pipeline, chat: ChatRequest, result: PipelineResult) -> DocumentOrder | None:
    """Where the client's documents went in the bodies sent: as the transforms left them (or wrote them into the
    prompt's text), told as `permuted` where the executor that ran sent each call an order of its own."""
    order = document_order(chat.documents, result.request.sent_documents)
    executor = pipeline.executor
    if order is None or executor is None or executor.strategy.keeps_order(executor.params):
        return order
    ran = any(step.name == executor.strategy.name for step in result.steps)
    return replace(order, permuted=True) if ran else order


def _check_choices(pipeline: Pipeline, chat: ChatRequest) -> None:
    """Refuse `n` > 1 for an executor that makes one answer, rather than answer with fewer choices than asked.

    Only when the executor will run: without documents the request goes upstream once, `n` and all.
    """
    executor = pipeline.executor
    n = chat.body.get("n")
    if executor is None or executor.strategy.answers_n or not chat.documents:
        return
    # Anything but an absent n or the integer 1 (2.0 and "2" included, which lenient upstreams read as 2).
    if n is not None and not (type(n) is int and n == 1):
        name = executor.strategy.name
        raise InvalidRequest(f"'n' must be 1 with the {name} strategy, which makes one answer; got n={n}", param="n")


async def _unless_disconnected(exchange: Exchange, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it (and every upstream call under it) if the client disconnects first, or
    answering 503 with Retry-After if it is still waiting when the drain deadline passes.

    `work` runs in the request's own task, which the watchers cancel: run as a task of its own and waited for
    (`asyncio.wait`), it started a loop iteration later and its result came back one later still."""
    task = asyncio.current_task()
    assert task is not None
    reasons: list[BaseException] = []
    over = False

    def stop(reason: BaseException) -> None:
        if not over and not reasons:
            reasons.append(reason)
            task.cancel()

    def watched(watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled():
            stop(ClientDisconnected())

    def drained(_: asyncio.Future[None]) -> None:
        stop(ShuttingDown("the proxy is shutting down; retry on another instance", headers={"retry-after": "1"}))

    # A task reading `receive` until the disconnect: reading it is also what has the server read on after a large
    # body (see `proxy.edge.connection.ConnectionLink`).
    watcher = asyncio.ensure_future(_disconnected(exchange.request))
    watcher.add_done_callback(watched)
    with exchange.state.drain_signal() as drain:
        drain.add_done_callback(drained)
        try:
            result = await work
        except asyncio.CancelledError:
            # Ours alone: a cancellation from outside too (the server's at the end of the grace) goes on up.
            if reasons and task.uncancel() == 0:
                raise reasons[0] from None
            raise
        finally:
            over = True  # from here no callback cancels the task: the work is over, whatever its outcome
            drain.remove_done_callback(drained)
            watcher.remove_done_callback(watched)
            watcher.cancel()
    if reasons:
        task.uncancel()  # the work finished in spite of the cancel: it must not reach what the task awaits next
    return result


async def _disconnected(request: Request[Any, Any, Any]) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
