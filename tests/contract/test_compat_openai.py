"""The openai SDK, sync and async, pointed at the proxy or straight at the upstream: the upstream receives the
same requests and the application gets the same objects, exceptions and headers."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.contract.compat_compare import plain, response_headers
from tests.contract.compat_harness import Compat, Reply
from tests.contract.compat_replies import (
    CITY_SCHEMA,
    ERRORS,
    MESSAGES,
    MODEL,
    PROVIDER_HEADERS,
    WEATHER_TOOL,
    answer,
    completion,
    logprobs_of,
    stream,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)

CLIENT: Any = {"api_key": "sk-client-fake", "max_retries": 0, "timeout": 20}
FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "async"])


class City(BaseModel):
    name: str
    country: str


def sdk_call(flavour: str, method: str, /, client_options: Any = None, **kwargs: Any) -> Callable[[str], Any]:
    """A call of `client.<method>(**kwargs)` on a fresh client at the given base URL, returning what the
    application got: the object, a stream's chunks and headers, or a raw response's headers and parsed body."""
    options = {**CLIENT, **(client_options or {})}

    def sync_call(base_url: str) -> Any:
        with openai.OpenAI(base_url=base_url, **options) as client:
            result = _attribute(client, method)(**kwargs)
            if isinstance(result, openai.Stream):
                return {"chunks": list(result), "response headers": _headers(result.response)}
            return _settled(result)

    async def async_call(base_url: str) -> Any:
        async with openai.AsyncOpenAI(base_url=base_url, **options) as client:
            result = await _attribute(client, method)(**kwargs)
            if isinstance(result, openai.AsyncStream):
                return {"chunks": [c async for c in result], "response headers": _headers(result.response)}
            return _settled(result)

    return sync_call if flavour == "sync" else async_call


def _attribute(client: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        client = getattr(client, name)
    return client


def _settled(result: Any) -> Any:
    if hasattr(result, "http_response") and hasattr(result, "parse"):  # with_raw_response
        return {
            "status": result.status_code,
            "request_id": result.request_id,
            "response headers": _headers(result.http_response),
            "parsed": plain(result.parse()),
        }
    return result


def _headers(response: Any) -> dict[str, str]:
    return response_headers(response.headers.multi_items())


def chat(flavour: str, **kwargs: Any) -> Callable[[str], Any]:
    return sdk_call(flavour, "chat.completions.create", model=MODEL, **{"messages": MESSAGES, **kwargs})


@FLAVOURS
def test_a_completion_and_its_request_id(compat: Compat, flavour: str) -> None:
    compat.check(answer(), chat(flavour, temperature=0.2, max_tokens=50, seed=7, user="user-1"))


@FLAVOURS
def test_a_stream_with_usage(compat: Compat, flavour: str) -> None:
    reply = stream(text_chunks("Pa", "ris", ".", usage=True))
    compat.check(reply, chat(flavour, stream=True, stream_options={"include_usage": True}))


@FLAVOURS
def test_a_stream_without_usage(compat: Compat, flavour: str) -> None:
    compat.check(stream(text_chunks("Pa", "ris", ".")), chat(flavour, stream=True))


@FLAVOURS
def test_a_stream_that_ends_after_its_finish_reason_without_done(compat: Compat, flavour: str) -> None:
    compat.check(stream(text_chunks("Pa", "ris", "."), done=False), chat(flavour, stream=True))


@FLAVOURS
def test_a_tool_call(compat: Compat, flavour: str) -> None:
    reply = answer(completion(tool_call("get_weather", {"city": "Paris"}), finish="tool_calls"))
    compat.check(reply, chat(flavour, tools=[WEATHER_TOOL], tool_choice="auto", parallel_tool_calls=False))


@FLAVOURS
def test_a_streamed_tool_call(compat: Compat, flavour: str) -> None:
    reply = stream(tool_call_chunks("get_weather", {"city": "Paris"}))
    compat.check(reply, chat(flavour, tools=[WEATHER_TOOL], stream=True))


def test_a_tool_result_sent_back(compat: Compat) -> None:
    messages = [
        *MESSAGES,
        tool_call("get_weather", {"city": "Paris"}),
        {"role": "tool", "tool_call_id": "call_fake_1", "content": '{"sky": "clear"}'},
    ]
    compat.check(answer(completion(text("Clear skies."))), chat("sync", messages=messages, tools=[WEATHER_TOOL]))


@FLAVOURS
def test_a_json_schema_response_format(compat: Compat, flavour: str) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True}}
    reply = answer(completion(text('{"name": "Paris", "country": "France"}')))
    compat.check(reply, chat(flavour, response_format=schema))


@FLAVOURS
def test_parse_with_a_pydantic_model(compat: Compat, flavour: str) -> None:
    reply = answer(completion(text('{"name": "Paris", "country": "France"}')))
    call = sdk_call(flavour, "chat.completions.parse", model=MODEL, messages=MESSAGES, response_format=City)
    compat.check(reply, call)


def test_n_choices(compat: Compat) -> None:
    compat.check(answer(completion(text("Paris."), text("Paris, France."))), chat("sync", n=2))


def test_logprobs(compat: Compat) -> None:
    reply = answer(completion(logprobs=logprobs_of("Paris", ".")))
    compat.check(reply, chat("sync", logprobs=True, top_logprobs=2))


@FLAVOURS
def test_image_content_parts(compat: Compat, flavour: str) -> None:
    pixel = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
    content = [
        {"type": "text", "text": "What is in these images?"},
        {"type": "image_url", "image_url": {"url": "https://example.test/cat.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
    ]
    compat.check(answer(), chat(flavour, messages=[{"role": "user", "content": content}]))


def test_twenty_megabytes_of_base64_images(compat: Compat) -> None:
    photo = "data:image/jpeg;base64," + base64.b64encode(b"\xff\xd8\xff" + b"\x17" * (5_000_000 - 3)).decode()
    content: list[Any] = [{"type": "text", "text": "Which photo is sharper?"}]
    content += [{"type": "image_url", "image_url": {"url": photo}}] * 3
    compat.check(answer(), chat("sync", messages=[{"role": "user", "content": content}]))


@FLAVOURS
def test_extra_query(compat: Compat, flavour: str) -> None:
    compat.check(answer(), chat(flavour, extra_query={"api-version": "2024-10-21", "trace": "a b&c"}))


@FLAVOURS
def test_extra_body_with_vendor_fields(compat: Compat, flavour: str) -> None:
    extra = {"top_k": 3, "repetition_penalty": 1.1, "guided_choice": ["Paris", "Lyon"]}
    compat.check(answer(), chat(flavour, extra_body=extra))


DOCUMENTS = [{"title": "France", "text": "Paris is the capital of France."}, "Lyon is in France."]


def test_a_documents_field_is_left_alone_without_a_strategy(compat: Compat) -> None:
    compat.check(answer(), chat("sync", extra_body={"documents": DOCUMENTS}))


def test_a_documents_field_is_left_alone_with_the_strategy_none(compat: Compat) -> None:
    call = chat("sync", extra_body={"documents": DOCUMENTS}, extra_headers={"X-Context-Strategy": "none"})
    compat.check(answer(), call)


@FLAVOURS
def test_extra_headers_including_the_clients_request_id(compat: Compat, flavour: str) -> None:
    headers = {"X-Request-Id": "client-trace-42", "X-Team": "search", "OpenAI-Organization": "org-client"}
    compat.check(answer(), chat(flavour, extra_headers=headers))


@FLAVOURS
def test_with_raw_response_headers(compat: Compat, flavour: str) -> None:
    call = sdk_call(flavour, "chat.completions.with_raw_response.create", model=MODEL, messages=MESSAGES)
    compat.check(answer(), call)


def test_with_raw_response_when_the_upstream_sends_no_request_id(compat: Compat) -> None:
    headers = {k: v for k, v in PROVIDER_HEADERS.items() if k != "x-request-id"}
    call = sdk_call("sync", "chat.completions.with_raw_response.create", model=MODEL, messages=MESSAGES)
    compat.check(Reply.json(completion(), headers=headers), call)


@FLAVOURS
@pytest.mark.parametrize("status", sorted(ERRORS))
def test_an_error_status(compat: Compat, flavour: str, status: str) -> None:
    compat.check(ERRORS[status], chat(flavour))


def test_an_error_status_on_a_stream_request(compat: Compat) -> None:
    compat.check(ERRORS["429"], chat("sync", stream=True))


def test_an_error_event_inside_a_stream(compat: Compat) -> None:
    failure = {"error": {"message": "The model overloaded.", "type": "server_error", "param": None, "code": None}}
    reply = Reply.sse([*text_chunks("Pa")[:2], failure], done=False)
    compat.check(reply, chat("sync", stream=True), raises=True)


@FLAVOURS
def test_the_sdks_default_retries_after_a_429(compat: Compat, flavour: str) -> None:
    throttled = ERRORS["429"]
    soon = Reply(throttled.status, (*throttled.headers, ("retry-after-ms", "1")), throttled.pieces)
    retrying = sdk_call(flavour, "chat.completions.create", {"max_retries": 2}, model=MODEL, messages=MESSAGES)
    compat.check([soon, answer()], retrying)


MODEL_CARD = {"id": MODEL, "object": "model", "created": 1_700_000_000, "owned_by": "fake"}


def test_models_list(compat: Compat) -> None:
    compat.check(answer({"object": "list", "data": [MODEL_CARD]}), sdk_call("sync", "models.list"))


def test_models_retrieve(compat: Compat) -> None:
    compat.check(answer(MODEL_CARD), sdk_call("sync", "models.retrieve", model=MODEL))


@FLAVOURS
def test_embeddings(compat: Compat, flavour: str) -> None:
    vector = base64.b64encode(struct.pack("<4f", 0.1, 0.2, 0.3, 0.4)).decode()
    body = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": vector}],
        "model": "fake-embedder",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    compat.check(answer(body), sdk_call(flavour, "embeddings.create", model="fake-embedder", input="Paris"))


def test_legacy_text_completions(compat: Compat) -> None:
    body = {
        "id": "cmpl-fake",
        "object": "text_completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "text": " Paris.", "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    compat.check(answer(body), sdk_call("sync", "completions.create", model=MODEL, prompt="The capital is"))
