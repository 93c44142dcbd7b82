"""litellm (`openai/<model>` with `api_base`) pointed at the proxy or straight at the upstream: completion,
streaming, tools and errors send the same requests and give the application the same responses.

litellm reads its model price list from GitHub at import unless `LITELLM_LOCAL_MODEL_COST_MAP` is set (the
suite's conftest sets it; the loopback guard would refuse the fetch anyway)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import litellm
import openai
import pytest
from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

from tests.contract.compat_compare import response_headers
from tests.contract.compat_harness import Compat
from tests.contract.compat_replies import (
    ERRORS,
    MESSAGES,
    MODEL,
    WEATHER_TOOL,
    answer,
    completion,
    stream,
    text_chunks,
    tool_call,
)

FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "async"])
# litellm warns from inside itself under this pydantic (its response types on first use, its stream builder on
# every usage chunk); with warnings as errors each call would fail inside litellm, identically both ways.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Items? .* (is|are) using the `ReadOnly` qualifier:UserWarning"),
    pytest.mark.filterwarnings("ignore:Accessing the 'model_[a-z_]*' attribute on the instance:DeprecationWarning"),
]


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    """litellm caches its clients by base URL and key and never closes them; each test closes and forgets them,
    so no socket is left to the garbage collector and no client of a closed event loop is reused."""
    yield
    for client in litellm.in_memory_llm_clients_cache.cache_dict.values():
        if isinstance(client, openai.OpenAI):
            client.close()
    litellm.in_memory_llm_clients_cache.flush_cache()


def response(value: Any) -> Any:
    """A `ModelResponse` as compared: its dump (litellm's measurements, such as `_response_ms`, are not part
    of it)."""
    return value.model_dump(mode="json")


def chunk_response(value: Any) -> Any:
    """A streamed chunk as compared: litellm stamps `created` with its own clock, not the upstream's."""
    return {key: item for key, item in response(value).items() if key != "created"}


def provider_headers(value: Any) -> dict[str, str]:
    """The upstream's response headers as litellm hands them on (`_hidden_params["additional_headers"]`, each
    as `llm_provider-<name>`; rate-limit and request-id headers are also copied under their own names)."""
    headers = getattr(value, "_hidden_params", {}).get("additional_headers") or {}
    prefix = "llm_provider-"
    return response_headers((k.removeprefix(prefix), v) for k, v in headers.items() if k.startswith(prefix))


def completion_call(flavour: str, **kwargs: Any) -> Callable[[str], Any]:
    options = {"model": f"openai/{MODEL}", "messages": MESSAGES, "api_key": "sk-client-fake", "max_retries": 0}

    def sync_call(base_url: str) -> Any:
        result = litellm.completion(api_base=base_url, timeout=20, **options, **kwargs)
        got = [chunk_response(c) for c in result] if kwargs.get("stream") else response(result)
        return {"response": got, "response headers": provider_headers(result)}

    async def async_call(base_url: str) -> Any:
        try:
            result = await litellm.acompletion(api_base=base_url, timeout=20, **options, **kwargs)
            got = [chunk_response(c) async for c in result] if kwargs.get("stream") else response(result)
            return {"response": got, "response headers": provider_headers(result)}
        finally:
            await close_litellm_async_clients()

    return sync_call if flavour == "sync" else async_call


@FLAVOURS
def test_completion(compat: Compat, flavour: str) -> None:
    compat.check(answer(), completion_call(flavour, temperature=0.2, max_tokens=50))


@FLAVOURS
def test_stream_with_usage(compat: Compat, flavour: str) -> None:
    reply = stream(text_chunks("Pa", "ris", ".", usage=True))
    compat.check(reply, completion_call(flavour, stream=True, stream_options={"include_usage": True}))


def test_stream_that_ends_after_its_finish_reason_without_done(compat: Compat) -> None:
    compat.check(stream(text_chunks("Pa", "ris", "."), done=False), completion_call("sync", stream=True))


def test_tools(compat: Compat) -> None:
    reply = answer(completion(tool_call("get_weather", {"city": "Paris"}), finish="tool_calls"))
    compat.check(reply, completion_call("sync", tools=[WEATHER_TOOL], tool_choice="auto"))


def test_extra_headers_and_vendor_fields(compat: Compat) -> None:
    call = completion_call("sync", extra_headers={"X-Request-Id": "client-trace-42"}, extra_body={"top_k": 3})
    compat.check(answer(), call)


@FLAVOURS
@pytest.mark.parametrize("status", ["400", "401", "429", "500"])
def test_an_error_status(compat: Compat, flavour: str, status: str) -> None:
    compat.check(ERRORS[status], completion_call(flavour))
