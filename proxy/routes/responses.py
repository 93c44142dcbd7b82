"""`POST /v1/responses`: the Responses API, relayed as the rest of `/v1` is, with the selected strategies applied
where its input carries documents (`contextlift.strategies.responses_api`: a message's text, its text parts, the
function calls' outputs).

The steps that rewrite a request (reorder, filter, focus, excerpt, repeat, ...) run on the input seen as chat
messages, and the body goes upstream with their changes written back into `input` and `instructions`; the answer,
whole or streamed, is the upstream's own bytes. A step that calls the upstream itself (an executor such as medoid or
recite; `pick`) reads chat completions: on this route it declines (`medoid -> none: chat-only`), and the request goes
as sent. So does a request whose input the chat view cannot say exactly (`none: unsupported-input-item=reasoning`).
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.response import Stream

from contextlift.proxy import json_text
from contextlift.proxy.edge.intake import json_fields, parse_json_object, reject_upstream_overrides, require_json
from contextlift.proxy.errors import InvalidStrategy, MalformedJSON, NotReady, UnsupportedMediaType
from contextlift.proxy.off_loop import off_loop, reading
from contextlift.proxy.policy import Auto
from contextlift.proxy.rewrite import rewrite
from contextlift.proxy.routes.exchange import Exchange
from contextlift.proxy.routes.relay import relay
from contextlift.proxy.state import STRATEGY_FIELD
from contextlift.strategies import AppliedStep
from contextlift.strategies.responses_api import ORIGIN, as_chat, responses_body

PATH = "responses"


@post("/v1/responses", status_code=200)
async def responses(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    """OpenAI's Responses API, with the strategies named in `X-Context-Strategy` applied to its input's documents."""
    exchange = Exchange.enter(request)
    state, record = exchange.state, exchange.record
    if state.shutting_down:
        raise NotReady("the proxy is shutting down", headers={"retry-after": "1"})
    raw = await request.body()
    try:
        require_json(request.headers.get("content-type"))
        body = await reading(parse_json_object, raw)
    except (UnsupportedMediaType, MalformedJSON):
        # Not a body this route reads: relayed as the rest of `/v1` relays it, for the upstream to answer.
        fields = await reading(json_fields, raw, request.headers.get("content-type"))
        reject_upstream_overrides(request.headers, fields)
        return await relay(request, PATH, raw)
    reject_upstream_overrides(request.headers, body)
    record.model = body.get("model") if isinstance(body.get("model"), str) else None
    # The body field selecting strategies is consumed here: the client's bytes then no longer match.
    sent = raw if STRATEGY_FIELD not in body else None
    try:
        selection = state.select_pipeline(request.headers, body)
    except InvalidStrategy:
        record.document_format = "none: invalid-strategy"
        raise
    if not isinstance(selection, Auto) and not selection.steps:
        return await relay(request, PATH, await _unchanged(sent, body))
    view = await off_loop(lambda: as_chat(body))
    if view.decline is not None:
        record.document_format = view.decline
        return await relay(request, PATH, await _unchanged(sent, body))
    rendered = await rewrite(state, selection, view.body, record, request.headers)
    if rendered is None:
        return await relay(request, PATH, await _unchanged(sent, body))
    if body.get("instructions") and rendered["messages"][0].get(ORIGIN) != "instructions":
        # A step moved or dropped the instructions among documents of the input: `instructions` has one place, so
        # the request goes as it came, and says so.
        record.applied = (AppliedStep("none", f"{record.requested.label} -> none: instructions-moved"),)
        record.order = None
        return await relay(request, PATH, await _unchanged(sent, body))
    try:
        content = await off_loop(lambda: json_text.dumps(responses_body(body, rendered), compact=True).encode())
    except ValueError:  # a number JSON cannot write back (1e999 read as infinity): the client's bytes, unchanged
        return await relay(request, PATH, raw)
    return await relay(request, PATH, content)


async def _unchanged(sent: bytes | None, body: dict[str, Any]) -> bytes:
    """The client's bytes, or (where the body's strategy field was taken out) the body written again."""
    if sent is not None:
        return sent
    try:
        return await off_loop(lambda: json_text.dumps(body, compact=True).encode())
    except ValueError:
        raise MalformedJSON("request body holds a number JSON cannot write back (1e999)") from None
