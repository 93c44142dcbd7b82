"""OpenTelemetry GenAI attributes of upstream calls; message content is never recorded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from opentelemetry.trace import Span


def span_name(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    return f"chat {model}" if isinstance(model, str) else "chat"


def describe_request(span: Span, body: Mapping[str, Any], base_url: str, *, stream: bool) -> None:
    """GenAI semantic-convention attributes of a call; message content is never recorded."""
    span.set_attribute("gen_ai.operation.name", "chat")
    span.set_attribute("gen_ai.system", "openai")
    if isinstance(body.get("model"), str):
        span.set_attribute("gen_ai.request.model", body["model"])
    for field_name, attribute in (("max_tokens", "gen_ai.request.max_tokens"),
                                  ("temperature", "gen_ai.request.temperature"),
                                  ("top_p", "gen_ai.request.top_p")):  # fmt: skip
        if isinstance(body.get(field_name), int | float) and not isinstance(body.get(field_name), bool):
            span.set_attribute(attribute, body[field_name])
    url = httpx.URL(base_url)
    span.set_attribute("server.address", url.host)
    if url.port:
        span.set_attribute("server.port", url.port)
    span.set_attribute("contextlift.stream", stream)


def describe_response(span: Span, body: Mapping[str, Any]) -> None:
    if isinstance(body.get("model"), str):
        span.set_attribute("gen_ai.response.model", body["model"])
    usage = body.get("usage")
    if isinstance(usage, Mapping):
        if isinstance(usage.get("prompt_tokens"), int):
            span.set_attribute("gen_ai.usage.input_tokens", usage["prompt_tokens"])
        if isinstance(usage.get("completion_tokens"), int):
            span.set_attribute("gen_ai.usage.output_tokens", usage["completion_tokens"])
    choices = body.get("choices")
    if isinstance(choices, list):
        reasons = [c.get("finish_reason") for c in choices if isinstance(c, Mapping) and c.get("finish_reason")]
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)
