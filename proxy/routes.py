"""The HTTP routes: chat completions with strategies, pass-through for the rest of `/v1`, health."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, TypeVar

import anyio
from litestar import Request, Response, get, post, route
from litestar.enums import HttpMethod
from litestar.params import FromPath
from litestar.response import Stream

from proxy.completion_chunks import completion_chunks
from proxy.errors import InvalidDocuments, NotReady, ProxyError, ShuttingDown, UpstreamError
from proxy.intake import check_chat_body, parse_json_object, read_limited, reject_upstream_overrides, require_json
from proxy.request_log import CLIENT_CLOSED_REQUEST, RequestRecord, record_of
from proxy.sse import DONE_FRAME, comment_frame, data_frame, json_frame
from proxy.state import ProxyState, proxy_state
from proxy.stream_usage import StreamUsage
from proxy.upstream import HOP_BY_HOP, forwarded_headers
from strategies import (
    Completion,
    CompletionStream,
    DocumentFieldError,
    PipelineResult,
    UpstreamFailure,
    parse_request,
    run_pipeline,
)

T = TypeVar("T")
_STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_NOT_RELAYED = HOP_BY_HOP | {"content-length", "content-encoding", "date", "server"}


class ClientDisconnected(Exception):
    """The client went away before its response was ready."""


@post("/v1/chat/completions", status_code=200)
async def chat_completions(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    """OpenAI chat completions, with the strategies named in `X-Context-Strategy` applied."""
    state = proxy_state(request)
    record = record_of(request.scope)
    if state.shutting_down:
        raise NotReady("the proxy is shutting down", headers={"retry-after": "1"})
    require_json(request.headers.get("content-type"))
    body = parse_json_object(
        await read_limited(request.stream(), request.headers.get("content-length"), state.settings.max_body_bytes)
    )
    check_chat_body(body)
    reject_upstream_overrides(request.headers, body)
    record.model = body.get("model") if isinstance(body.get("model"), str) else None
    pipeline = state.select_pipeline(request.headers, body)
    try:
        chat = parse_request(body)
    except DocumentFieldError as error:
        raise InvalidDocuments(str(error), param="documents") from None
    record.documents = len(chat.documents)
    record.strategy = pipeline.label
    if pipeline.needs_embedder:
        await _embedder_ready(state)
    upstream = state.upstream.for_request(request.headers, state.settings.max_upstream_calls)
    record.ledger = upstream.ledger
    work = run_pipeline(pipeline, chat, upstream, state.services)
    if chat.stream and chat.documents and not pipeline.streams_directly:
        # Nothing to relay until every answer is in: start the stream now and keep it alive meanwhile.
        record.planned_calls = pipeline.max_upstream_calls()
        keepalive = state.settings.stream_keepalive
        return Stream(_stream_when_done(work, record, chat.body, keepalive), media_type="text/event-stream",
                      headers=_STREAM_HEADERS)  # fmt: skip
    try:
        result = await _unless_disconnected(request, work)
    except ClientDisconnected:
        record.finish(CLIENT_CLOSED_REQUEST)
        return Response(b"", status_code=CLIENT_CLOSED_REQUEST)
    except UpstreamFailure as error:
        record.error = getattr(error, "code", type(error).__name__)
        raise
    record.strategy = result.applied
    outcome = result.outcome
    if isinstance(outcome, Completion) and not chat.stream:
        content = json.dumps(outcome.body, ensure_ascii=False).encode()
        return Response(content, media_type="application/json", headers=dict(outcome.headers))
    if isinstance(outcome, Completion):
        frames = _completion_frames(outcome, chat.body)
        return Stream(frames, media_type="text/event-stream", headers={**outcome.headers, **_STREAM_HEADERS})
    usage = StreamUsage(result.request.render(), state.tokenizer, getattr(outcome, "prior_usage", None))
    return Stream(
        _relay(outcome, record, usage, state),
        media_type="text/event-stream",
        headers={**outcome.headers, **_STREAM_HEADERS},
    )


async def _embedder_ready(state: ProxyState) -> None:
    if state.startup_error:
        raise NotReady(state.startup_error)
    try:
        async with asyncio.timeout(state.settings.local_model_startup_timeout):
            await state.embedder_ready.wait()
    except TimeoutError:
        raise NotReady("the embedder is still loading", headers={"retry-after": "5"}) from None


def _completion_frames(completion: Completion, body: Mapping[str, Any]) -> list[bytes]:
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    chunks = completion_chunks(completion.body, include_usage=include_usage)
    return [*(json_frame(c) for c in chunks), DONE_FRAME]


async def _stream_when_done(
    work: Awaitable[PipelineResult], record: RequestRecord, body: Mapping[str, Any], keepalive: float
) -> AsyncIterator[bytes]:
    """Keep-alive comments until the pipeline is done, then its completion as chunks, then `[DONE]`."""
    task = asyncio.ensure_future(work)
    ended = False
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=keepalive)
            if not task.done():
                yield comment_frame()
        try:
            result = task.result()
        except UpstreamFailure as error:
            yield _error_frame(error, record)
            yield DONE_FRAME
            ended = True
            return
        record.strategy = result.applied
        assert isinstance(result.outcome, Completion)
        for frame in _completion_frames(result.outcome, body):
            yield frame
        ended = True
    finally:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(task, return_exceptions=True)
        if not ended:
            record.finish(CLIENT_CLOSED_REQUEST)


async def _relay(
    stream: CompletionStream, record: RequestRecord, usage: StreamUsage, state: ProxyState
) -> AsyncIterator[bytes]:
    """The upstream's events re-framed one by one, then `[DONE]`; a failure mid-way becomes an error event."""
    ended = False
    try:
        try:
            async for data in stream.events():
                if state.draining_expired():
                    raise ShuttingDown("the proxy is shutting down; the stream was ended")
                usage.observe(data)
                record.first_event()
                yield data_frame(data)
            missing = usage.missing_chunk()
            if missing is not None:
                yield json_frame(missing)
        except ShuttingDown as error:
            record.error = error.code
            yield json_frame(error.envelope())
        except UpstreamFailure as error:
            yield _error_frame(error, record)
        yield DONE_FRAME
        ended = True
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        if not ended:
            record.finish(CLIENT_CLOSED_REQUEST)


def _error_frame(error: UpstreamFailure, record: RequestRecord) -> bytes:
    """The error event that ends a stream whose upstream failed after the response started."""
    proxy_error = error if isinstance(error, ProxyError) else UpstreamError(str(error))
    record.error = proxy_error.code
    return json_frame(proxy_error.envelope())


async def _unless_disconnected(request: Request[Any, Any, Any], work: Awaitable[T]) -> T:
    """Await `work`, cancelling it (and every upstream call under it) if the client disconnects first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise ClientDisconnected


async def _disconnected(request: Request[Any, Any, Any]) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


@get("/v1/models")
async def list_models(request: Request[Any, Any, Any]) -> Stream:
    """The upstream's model list, as it answered."""
    return await _pass_through(request, "models")


@route(
    "/v1/{path:path}",
    http_method=[HttpMethod.GET, HttpMethod.POST, HttpMethod.PUT, HttpMethod.PATCH, HttpMethod.DELETE],
)
async def pass_through(request: Request[Any, Any, Any], path: FromPath[str]) -> Stream:
    """Any other `/v1` endpoint (embeddings, completions, files ...), relayed unchanged."""
    return await _pass_through(request, path.lstrip("/"))


async def _pass_through(request: Request[Any, Any, Any], path: str) -> Stream:
    state = proxy_state(request)
    record = record_of(request.scope)
    content = await read_limited(request.stream(), request.headers.get("content-length"), state.settings.max_body_bytes)
    headers = forwarded_headers(request.headers, state.upstream.api_key)
    upstream_request = state.upstream.build_request(
        request.method, path, headers=headers, content=content or None, params=request.url.query or None
    )
    record.ledger.started()
    try:
        response = await state.upstream.send(upstream_request)
    except UpstreamError as error:
        record.ledger.failed(error)
        record.ledger.finished()
        record.error = error.code
        raise

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
                record.ledger.finished()

    relayed = {k: v for k, v in response.headers.items() if k.lower() not in _NOT_RELAYED}
    return Stream(relay(), status_code=response.status_code, headers=relayed)


@get("/metrics", media_type="text/plain; version=0.0.4; charset=utf-8")
async def metrics(request: Request[Any, Any, Any]) -> bytes:
    """Prometheus metrics of this process."""
    return proxy_state(request).metrics.render()


@get("/startupz")
async def startupz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """Started: everything loaded at start-up (the embedder) is in memory. The upstream is readiness' concern."""
    state = proxy_state(request)
    if state.startup_error:
        return Response({"status": "failed", "reasons": [state.startup_error]}, status_code=503)
    started = state.embedder_ready.is_set()
    return Response({"status": "started" if started else "starting"}, status_code=200 if started else 503)


@get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@get("/readyz")
async def readyz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """Ready for traffic: not shutting down, the embedder loaded, and the upstream reachable."""
    state = proxy_state(request)
    reasons = []
    if state.shutting_down:
        reasons.append("shutting down")
    if state.startup_error:
        reasons.append(state.startup_error)
    elif not state.embedder_ready.is_set():
        reasons.append("embedder loading")
    if not state.shutting_down and not await state.upstream.reachable():
        reasons.append(f"upstream {state.upstream.base_url} unreachable")
    ready = not reasons
    body = {"status": "ready" if ready else "not ready", "upstream": state.upstream.base_url, "reasons": reasons}
    return Response(body, status_code=200 if ready else 503)


ROUTES = [chat_completions, list_models, pass_through, metrics, startupz, healthz, readyz]

__all__ = ["ROUTES"]
