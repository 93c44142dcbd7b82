"""The rest of `/v1` (models, embeddings, completions, files ...): relayed unchanged but for the key, through the
same request view of the upstream as chat completions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import structlog
from litestar import Request, Response, get, route
from litestar.enums import HttpMethod
from litestar.params import FromPath
from litestar.response import Stream

from contextlift.proxy.edge.admission import at_request_end
from contextlift.proxy.edge.intake import json_fields, reject_upstream_overrides
from contextlift.proxy.edge.paths import encoded_path
from contextlift.proxy.errors import UpstreamError
from contextlift.proxy.off_loop import reading
from contextlift.proxy.routes.exchange import Exchange
from contextlift.proxy.upstream.headers import relayed_headers
from contextlift.proxy.upstream.sse import DONE_FRAME, json_frame

log = structlog.get_logger("contextlift")


@get("/v1/models")
async def list_models(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    """The upstream's model list, as it answered."""
    return await _pass_through(request, "models")


@route(
    "/v1/{path:path}",
    http_method=[HttpMethod.GET, HttpMethod.POST, HttpMethod.PUT, HttpMethod.PATCH, HttpMethod.DELETE],
)
async def pass_through(request: Request[Any, Any, Any], path: FromPath[str]) -> Response[bytes] | Stream:
    """Any other `/v1` endpoint (embeddings, completions, files ...), relayed unchanged but for the key."""
    return await _pass_through(request, path.lstrip("/"))


async def _pass_through(request: Request[Any, Any, Any], path: str) -> Response[bytes] | Stream:
    content = await request.body()
    fields = await reading(json_fields, content, request.headers.get("content-type"))
    reject_upstream_overrides(request.headers, fields)
    return await relay(request, path, content)


async def relay(request: Request[Any, Any, Any], path: str, content: bytes) -> Response[bytes] | Stream:
    """`content` sent to the upstream's `path` with the request's method, and the answer relayed as it comes (an
    error's body read whole, bounded, and blanked of the key). The caller has checked the request's fields."""
    exchange = Exchange.enter(request)
    record = exchange.record
    upstream = exchange.upstream()
    guard = upstream.guard
    try:
        call = await upstream.relay(request.method, encoded_path(path), content or None)
    except UpstreamError as error:
        record.error = error.code
        raise
    # Finished by whichever comes first: the relay's end, or the request's end if the relay never ran.
    at_request_end(request.scope, call.finish)
    response = call.response
    relayed = guard.blank_headers(relayed_headers(response.headers, content_type=True))
    if response.status_code >= 400:
        # Error bodies are small and are where keys get echoed: read whole, bounded, and blanked.
        try:
            body = await call.read()
        except UpstreamError as error:
            record.error = error.code
            raise
        finally:
            await call.aclose()
        return Response(guard.blank(body), status_code=response.status_code, headers=relayed)

    streams_events = response.headers.get("content-type", "").lower().startswith("text/event-stream")

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in guard.blank_stream(call.chunks()):
                yield chunk
        except UpstreamError as failure:
            # The status is sent: the body ends early, and an event stream says why in an error event.
            record.error = failure.code
            log.warning("pass-through body cut", path=path, error=str(failure))
            if streams_events:
                # The blank lines end whatever event was cut short, so the error event is read on its own.
                yield b"\n\n" + json_frame(failure.envelope()) + DONE_FRAME
        finally:
            with anyio.CancelScope(shield=True):
                await call.aclose()

    return Stream(relay(), status_code=response.status_code, headers=relayed)
