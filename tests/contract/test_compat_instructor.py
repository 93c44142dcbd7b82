"""instructor over the openai SDK pointed at the proxy or straight at the upstream: structured extraction by
tool call, by JSON schema and streamed as partial objects sends the same requests and gives the application
the same objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import instructor
import openai
import pytest
from pydantic import BaseModel

from tests.contract.compat_compare import plain
from tests.contract.compat_harness import Compat
from tests.contract.compat_replies import (
    MESSAGES,
    MODEL,
    answer,
    completion,
    stream,
    text,
    tool_call,
    tool_call_chunks,
)

CLIENT: Any = {"api_key": "sk-client-fake", "max_retries": 0, "timeout": 20}
PARIS = {"name": "Paris", "country": "France"}


class City(BaseModel):
    name: str
    country: str


def extraction(flavour: str, mode: instructor.Mode, **kwargs: Any) -> Callable[[str], Any]:
    """`client.chat.completions.create(response_model=City, ...)` through instructor, returning the object
    and the completion it came from (instructor keeps it as `_raw_response`)."""
    request = {"model": MODEL, "messages": MESSAGES, "response_model": City, "max_retries": 1, **kwargs}

    def sync_call(base_url: str) -> Any:
        with openai.OpenAI(base_url=base_url, **CLIENT) as sdk:
            city = instructor.from_openai(sdk, mode=mode).chat.completions.create(**request)
            return {"object": plain(city), "raw": plain(getattr(city, "_raw_response", None))}

    async def async_call(base_url: str) -> Any:
        async with openai.AsyncOpenAI(base_url=base_url, **CLIENT) as sdk:
            city = await instructor.from_openai(sdk, mode=mode).chat.completions.create(**request)
            return {"object": plain(city), "raw": plain(getattr(city, "_raw_response", None))}

    return sync_call if flavour == "sync" else async_call


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_extraction_by_tool_call(compat: Compat, flavour: str) -> None:
    reply = answer(completion(tool_call("City", PARIS), finish="tool_calls"))
    compat.check(reply, extraction(flavour, instructor.Mode.TOOLS))


def test_extraction_by_json_schema(compat: Compat) -> None:
    reply = answer(completion(text('{"name": "Paris", "country": "France"}')))
    compat.check(reply, extraction("sync", instructor.Mode.JSON_SCHEMA))


def test_partial_objects_streamed(compat: Compat) -> None:
    def call(base_url: str) -> Any:
        with openai.OpenAI(base_url=base_url, **CLIENT) as sdk:
            client = instructor.from_openai(sdk, mode=instructor.Mode.TOOLS)
            partials = client.chat.completions.create_partial(model=MODEL, messages=MESSAGES, response_model=City)
            return [plain(p) for p in partials]

    compat.check(stream(tool_call_chunks("City", PARIS)), call)
