"""Streaming a chat answer to the client: the upstream's stream relayed event by event (usage added when the
client asked for it and the upstream did not send it), or a whole completion framed as chunks once a strategy
that cannot stream is done, with keep-alive comments meanwhile. Whatever fails on the way ends the stream with
an error event and `[DONE]`; a client never sees a stream cut without one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

import anyio
import structlog

from contextlift.proxy.errors import ProxyError, ShuttingDown, UpstreamError, UpstreamProtocolError
from contextlift.proxy.request_log import CLIENT_CLOSED_REQUEST, RequestRecord
from contextlift.proxy.routes.completion_chunks import completion_chunks
from contextlift.proxy.routes.exchange import Exchange
from contextlift.proxy.routes.stream_usage import StreamUsage
from contextlift.proxy.upstream.key_guard import KeyGuard
from contextlift.proxy.upstream.sse import DONE_FRAME, comment_frame, data_frame, json_frame
from contextlift.strategies import Completion, CompletionStream, PipelineResult, UpstreamFailure

log = structlog.get_logger("contextlift")


def completion_frames(completion: Completion, body: Mapping[str, Any], guard: KeyGuard) -> list[bytes]:
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
    chunks = completion_chunks(completion.body, include_usage=include_usage)
    return [*(guard.blank(json_frame(c)) for c in chunks), DONE_FRAME]


async def stream_when_done(
    work: Awaitable[PipelineResult], exchange: Exchange, body: Mapping[str, Any], guard: KeyGuard
) -> AsyncIterator[bytes]:
    """Keep-alive comments until the pipeline is done, then its completion as chunks, then `[DONE]`.

    Whatever fails on the way (the upstream, a strategy, the drain deadline, a bug) ends the stream with
    an error event and `[DONE]`: a client never sees a stream cut without one.
    """
    state, record = exchange.state, exchange.record
    task: asyncio.Future[PipelineResult] = asyncio.ensure_future(work)
    keepalive = state.settings.stream_keepalive
    ended = False
    try:
        try:
            with state.drain_signal() as drained:
                while not task.done():
                    waits: set[asyncio.Future[Any]] = {task, drained}
                    await asyncio.wait(waits, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED)
                    if state.draining_expired():
                        raise ShuttingDown("the proxy is shutting down; the stream was ended")
                    if not task.done():
                        yield comment_frame()
            result = task.result()
            record.applied = result.steps
            if not isinstance(result.outcome, Completion):
                raise UpstreamProtocolError("the strategy produced a stream where a completion was expected")
            if record.shadow is not None:
                record.shadow.served_completion(result.outcome)
            frames = completion_frames(result.outcome, body, guard)
        except Exception as error:  # every failure becomes the stream's error event; see the docstring
            frames = [error_frame(error, record), DONE_FRAME]
        for frame in frames:
            yield frame
        ended = True
    finally:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(task, return_exceptions=True)
        if not ended:
            record.finish(CLIENT_CLOSED_REQUEST)


async def relay_stream(
    stream: CompletionStream, exchange: Exchange, usage: StreamUsage, guard: KeyGuard
) -> AsyncIterator[bytes]:
    """The upstream's events re-framed one by one, then `[DONE]`; any failure mid-way (the upstream, the
    drain deadline, a bug) becomes an error event before `[DONE]`."""
    state, record = exchange.state, exchange.record
    ended = False
    events = aiter(stream.events())
    try:
        try:
            # One drain signal for the whole stream, waited on beside each event.
            with state.drain_signal() as drained:
                while True:
                    data = await next_or_drained(events, drained, state.draining_expired())
                    if data is None:
                        break
                    usage.observe(data)
                    if record.shadow is not None:
                        record.shadow.served_event(data)
                    record.first_event()
                    yield guard.blank(data_frame(data))
            missing = usage.missing_chunk()
            if missing is not None:
                yield json_frame(missing)
        except Exception as error:  # every failure becomes the stream's error event; see the docstring
            yield error_frame(error, record)
        yield DONE_FRAME
        ended = True
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        if not ended:
            record.finish(CLIENT_CLOSED_REQUEST)


async def next_or_drained(events: AsyncIterator[str], drained: asyncio.Future[None], expired: bool) -> str | None:
    """The next event, None at the end; ShuttingDown once the drain deadline passes (`expired`, or `drained`
    done while waiting), even mid-silence."""
    if expired or drained.done():
        raise ShuttingDown("the proxy is shutting down; the stream was ended")
    following = asyncio.ensure_future(anext(events))
    try:
        waits: set[asyncio.Future[Any]] = {following, drained}
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not following.done():
            following.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(following, return_exceptions=True)
    if not following.done() or following.cancelled():
        raise ShuttingDown("the proxy is shutting down; the stream was ended")
    try:
        return following.result()
    except StopAsyncIteration:
        return None


def error_frame(error: Exception, record: RequestRecord) -> bytes:
    """The error event that ends a stream whose response already started."""
    if isinstance(error, ProxyError):
        proxy_error = error
    elif isinstance(error, UpstreamFailure):
        proxy_error = UpstreamError(str(error))
    else:
        log.exception("stream failed", error_type=type(error).__name__)
        proxy_error = ProxyError("internal error in the proxy; see its logs")
    record.error = proxy_error.code
    return json_frame(proxy_error.envelope())
