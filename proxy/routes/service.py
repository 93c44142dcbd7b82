"""The proxy's own endpoints: `/contextlift/detect`, `/metrics`, and the probes `/startupz`, `/healthz`, `/readyz`."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get, post

from contextlift.proxy import json_text
from contextlift.proxy.edge.intake import check_chat_body, parse_json_object, require_json
from contextlift.proxy.errors import (
    PayloadTooLarge,
)
from contextlift.proxy.off_loop import off_loop, reading
from contextlift.proxy.state import proxy_state
from contextlift.strategies import (
    DocumentLimitError,
    explain_detection,
)


@post("/contextlift/detect", status_code=200)
async def detect(request: Request[Any, Any, Any]) -> Response[bytes]:
    """What detection finds in a chat-completions body (`?format=` names a shape); nothing goes upstream."""
    state = proxy_state(request)
    require_json(request.headers.get("content-type"))
    raw = await request.body()
    body = await reading(parse_json_object, raw)
    check_chat_body(body)
    shape = request.query_params.get("format")
    state.check_shape(shape, "format")

    def explained() -> bytes:
        found = explain_detection(body, limits=state.document_limits, declared=state.declared_formats, shape=shape)
        return json_text.dumps(found).encode()  # as large as the documents: serialised off the loop too

    try:
        content = await off_loop(explained)
    except DocumentLimitError as error:
        raise PayloadTooLarge(str(error), param="documents") from None
    return Response(content, media_type="application/json")


@get("/metrics", media_type="text/plain; version=0.0.4; charset=utf-8")
async def metrics(request: Request[Any, Any, Any]) -> bytes:
    """Prometheus metrics of this process."""
    return proxy_state(request).metrics.render()


@get("/startupz")
async def startupz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """Started: everything loaded at start-up is in memory (the embedder, where a setting has it loaded then;
    otherwise it loads when first needed, and start-up does not wait for it). The upstream is readiness' concern."""
    state = proxy_state(request)
    if state.startup_error:
        return Response({"status": "failed", "reasons": [state.startup_error]}, status_code=503)
    started = not state.embedder.preloaded_for or state.embedder.ready.is_set()
    return Response({"status": "started" if started else "starting"}, status_code=200 if started else 503)


@get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive."""
    return {"status": "ok"}


@get("/readyz")
async def readyz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """Ready for traffic: not shutting down, what start-up loads loaded, and the upstream reachable."""
    state = proxy_state(request)
    reasons = []
    if state.shutting_down:
        reasons.append("shutting down")
    if state.startup_error:
        reasons.append(state.startup_error)
    elif state.embedder.preloaded_for and not state.embedder.ready.is_set():
        reasons.append("embedder loading")
    if not state.shutting_down and not await state.upstream.reachable():
        reasons.append(f"upstream {state.upstream.base_url} unreachable")
    ready = not reasons
    body: dict[str, Any] = {
        "status": "ready" if ready else "not ready",
        "upstream": state.upstream.base_url,
        "reasons": reasons,
    }
    # A shared store that cannot be reached is said, never a reason to take the replica out of service: it only
    # changes whose shadow budget the replica spends.
    if state.shadow is not None and (store := state.shadow.store_status()) is not None:
        body["shadow_store"] = store
    return Response(body, status_code=200 if ready else 503)
