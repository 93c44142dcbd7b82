"""LangChain's `ChatOpenAI` pointed at the proxy or straight at the upstream: invoke, stream, tools and
structured output send the same requests and give the application the same messages and exceptions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from langchain_core.messages import BaseMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from tests.contract.compat_harness import Compat
from tests.contract.compat_replies import (
    ERRORS,
    MODEL,
    WEATHER_TOOL,
    answer,
    completion,
    stream,
    text,
    text_chunks,
    tool_call,
    tool_call_chunks,
)

QUESTION = "What is the capital of France?"
FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "async"])


class City(BaseModel):
    name: str
    country: str


def chat_model(base_url: str, **options: Any) -> ChatOpenAI:
    """The model as a user builds it, but for the HTTP client, passed in so that the test closes it."""
    return ChatOpenAI(model=MODEL, base_url=base_url, api_key="sk-client-fake", max_retries=0, timeout=20, **options)


def message(value: Any) -> Any:
    """What LangChain returned, as compared: it gives a message the upstream did not name a fresh run id
    (`lc_run--<uuid>`) each call."""
    if isinstance(value, BaseMessage):
        dumped = value.model_dump(mode="json")
        if str(dumped.get("id", "")).startswith("lc_run-"):
            dumped["id"] = "<run id>"
        return dumped
    if isinstance(value, dict):
        return {key: message(item) for key, item in value.items()}
    return value


def invoke(flavour: str, build: Callable[[ChatOpenAI], Any], **options: Any) -> Callable[[str], Any]:
    """`build(chat_model)` invoked with the question (sync or async), its result as compared."""

    def sync_call(base_url: str) -> Any:
        with openai.DefaultHttpxClient() as http:
            return message(build(chat_model(base_url, http_client=http, **options)).invoke(QUESTION))

    async def async_call(base_url: str) -> Any:
        async with openai.DefaultAsyncHttpxClient() as http:
            return message(await build(chat_model(base_url, http_async_client=http, **options)).ainvoke(QUESTION))

    return sync_call if flavour == "sync" else async_call


def streamed(flavour: str, build: Callable[[ChatOpenAI], Any], **options: Any) -> Callable[[str], Any]:
    def sync_call(base_url: str) -> Any:
        with openai.DefaultHttpxClient() as http:
            return [message(c) for c in build(chat_model(base_url, http_client=http, **options)).stream(QUESTION)]

    async def async_call(base_url: str) -> Any:
        async with openai.DefaultAsyncHttpxClient() as http:
            model = build(chat_model(base_url, http_async_client=http, **options))
            return [message(c) async for c in model.astream(QUESTION)]

    return sync_call if flavour == "sync" else async_call


def itself(model: ChatOpenAI) -> ChatOpenAI:
    return model


@FLAVOURS
def test_invoke(compat: Compat, flavour: str) -> None:
    compat.check(answer(), invoke(flavour, itself, temperature=0.1))


@FLAVOURS
def test_stream(compat: Compat, flavour: str) -> None:
    compat.check(stream(text_chunks("Pa", "ris", ".", usage=True)), streamed(flavour, itself, stream_usage=True))


@FLAVOURS
def test_bind_tools(compat: Compat, flavour: str) -> None:
    reply = answer(completion(tool_call("get_weather", {"city": "Paris"}), finish="tool_calls"))
    compat.check(reply, invoke(flavour, lambda model: model.bind_tools([WEATHER_TOOL])))


def test_bind_tools_streamed(compat: Compat) -> None:
    reply = stream(tool_call_chunks("get_weather", {"city": "Paris"}))
    compat.check(reply, streamed("sync", lambda model: model.bind_tools([WEATHER_TOOL], tool_choice="get_weather")))


@FLAVOURS
def test_with_structured_output_json_schema(compat: Compat, flavour: str) -> None:
    reply = answer(completion(text('{"name": "Paris", "country": "France"}')))
    compat.check(reply, invoke(flavour, lambda model: model.with_structured_output(City, include_raw=True)))


def test_with_structured_output_function_calling(compat: Compat) -> None:
    reply = answer(completion(tool_call("City", {"name": "Paris", "country": "France"}), finish="tool_calls"))
    compat.check(reply, invoke("sync", lambda model: model.with_structured_output(City, method="function_calling")))


@FLAVOURS
@pytest.mark.parametrize("status", ["401", "429"])
def test_an_error_status(compat: Compat, flavour: str, status: str) -> None:
    compat.check(ERRORS[status], invoke(flavour, itself))
