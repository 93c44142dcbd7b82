"""The scripted upstream's answers, shaped as OpenAI sends them: completions (plain, tool calls, structured,
`n` > 1, logprobs), streams (with and without usage, ending without `[DONE]`), and error replies with the
headers providers send alongside (request id, rate limits, retry-after)."""

from __future__ import annotations

import json
from typing import Any

from tests.contract.compat_harness import Reply

MODEL = "fake-model"
MESSAGES: Any = [{"role": "user", "content": "What is the capital of France?"}]
PROVIDER_HEADERS = {
    "x-request-id": "req_upstream_0001",
    "openai-organization": "org-fake",
    "openai-project": "proj_fake",
    "openai-processing-ms": "42",
    "openai-version": "2020-10-01",
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-reset-requests": "6ms",
}
"""What OpenAI sends with every answer; the proxy must relay all of it unchanged."""
USAGE = {"prompt_tokens": 14, "completion_tokens": 2, "total_tokens": 16}
WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CITY_SCHEMA: Any = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
    "required": ["name", "country"],
    "additionalProperties": False,
}


def completion(
    *messages: dict[str, Any], finish: str = "stop", logprobs: Any = None, usage: Any = USAGE
) -> dict[str, Any]:
    """A chat completion with one choice per message (an assistant text answer by default)."""
    answers = messages or ({"role": "assistant", "content": "Paris."},)
    choices = [
        {"index": i, "message": {"refusal": None, **m}, "logprobs": logprobs, "finish_reason": finish}
        for i, m in enumerate(answers)
    ]
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_fake",
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def text(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_fake_1") -> dict[str, Any]:
    """An assistant message calling one tool."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def logprobs_of(*tokens: str) -> dict[str, Any]:
    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    return {
        "content": [{**entry(t, -0.01 * i), "top_logprobs": [entry(t, -0.01 * i), entry("x", -5.0)]} for i, t in
                    enumerate(tokens)],
        "refusal": None,
    }  # fmt: skip


def answer(body: dict[str, Any] | None = None, **headers: str) -> Reply:
    """A 200 JSON answer with the provider's headers (overridden or extended by `headers`)."""
    return Reply.json(body or completion(), headers={**PROVIDER_HEADERS, **_names(headers)})


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": index, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }


def usage_chunk() -> dict[str, Any]:
    return {**chunk(), "choices": [], "usage": USAGE}


def text_chunks(*pieces: str, usage: bool = False) -> list[dict[str, Any]]:
    """A streamed text answer: the role, the pieces, a `stop` chunk, then the usage chunk if asked for."""
    first = chunk({"role": "assistant", "content": ""})
    middle = [chunk({"content": p}) for p in pieces]
    return [first, *middle, chunk(finish="stop"), *([usage_chunk()] if usage else [])]


def tool_call_chunks(name: str, arguments: dict[str, Any], call_id: str = "call_fake_1") -> list[dict[str, Any]]:
    """A streamed tool call, its arguments in two pieces, as OpenAI streams them."""
    encoded = json.dumps(arguments)
    half = len(encoded) // 2
    opening = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [opening]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": encoded[:half]}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": encoded[half:]}}]}),
        chunk(finish="tool_calls"),
    ]


def stream(events: list[dict[str, Any]], *, done: bool = True, **headers: str) -> Reply:
    return Reply.sse(events, done=done, headers={**PROVIDER_HEADERS, **_names(headers)})


def _names(headers: dict[str, str]) -> dict[str, str]:
    """Keyword names as header names: `retry_after` is `retry-after`."""
    return {name.replace("_", "-"): value for name, value in headers.items()}


def error(status: int, message: str, kind: str, code: str | None, **headers: str) -> Reply:
    """An error in the OpenAI envelope with the provider's headers."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply.json(body, status=status, headers={**PROVIDER_HEADERS, **_names(headers)})


ERRORS = {
    "400": error(400, "Invalid value for 'temperature'.", "invalid_request_error", "invalid_value"),
    "401": error(401, "Incorrect API key provided: sk-fake.", "invalid_request_error", "invalid_api_key"),
    "429": error(
        429,
        "Rate limit reached for requests.",
        "requests",
        "rate_limit_exceeded",
        retry_after="20",
        x_ratelimit_remaining_requests="0",
        x_ratelimit_reset_requests="20s",
    ),
    "500": error(500, "The server had an error while processing your request.", "server_error", None),
}
"""One reply per error status the suite checks, each with the headers a client reads from it."""
