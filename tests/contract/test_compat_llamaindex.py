"""LlamaIndex's `OpenAILike` pointed at the proxy or straight at the upstream: chat, completion and their
streamed and async forms send the same requests and give the application the same responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike

from tests.contract.compat_harness import Compat
from tests.contract.compat_replies import ERRORS, MODEL, answer, stream, text_chunks

QUESTION = [ChatMessage(role="user", content="What is the capital of France?")]
FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "async"])


def llm(base_url: str, **http: Any) -> OpenAILike:
    """The model as a user builds it, but for the HTTP client, passed in so that the test closes it."""
    options: Any = {"max_retries": 0, "timeout": 20, "context_window": 8192}
    return OpenAILike(model=MODEL, api_base=base_url, api_key="sk-client-fake", is_chat_model=True, **options, **http)


def response(value: Any) -> Any:
    """A chat or completion response as compared: everything but `raw` duplicated under `message`."""
    return value.model_dump(mode="json")


def call(flavour: str, method: str, *args: Any) -> Callable[[str], Any]:
    def sync_call(base_url: str) -> Any:
        with openai.DefaultHttpxClient() as http:
            result = getattr(llm(base_url, http_client=http), method)(*args)
            return [response(r) for r in result] if method.startswith("stream") else response(result)

    async def async_call(base_url: str) -> Any:
        async with openai.DefaultAsyncHttpxClient() as http:
            result = await getattr(llm(base_url, async_http_client=http), f"a{method}")(*args)
            return [response(r) async for r in result] if method.startswith("stream") else response(result)

    return sync_call if flavour == "sync" else async_call


@FLAVOURS
def test_chat(compat: Compat, flavour: str) -> None:
    compat.check(answer(), call(flavour, "chat", QUESTION))


@FLAVOURS
def test_stream_chat(compat: Compat, flavour: str) -> None:
    compat.check(stream(text_chunks("Pa", "ris", ".")), call(flavour, "stream_chat", QUESTION))


def test_complete(compat: Compat) -> None:
    compat.check(answer(), call("sync", "complete", "The capital of France is"))


def test_stream_complete(compat: Compat) -> None:
    compat.check(stream(text_chunks("Pa", "ris", ".")), call("sync", "stream_complete", "The capital of France is"))


@FLAVOURS
def test_an_error_status(compat: Compat, flavour: str) -> None:
    compat.check(ERRORS["429"], call(flavour, "chat", QUESTION))
