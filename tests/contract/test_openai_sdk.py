"""Contract: the real `openai` SDK, pointed at the proxy by base URL only, behaves as against the upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest
from litestar.testing import AsyncTestClient, TestClient

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder, FakeUpstream, chunk, completion, sse_body, sse_response
from tests.serving import UPSTREAM

MESSAGES: Any = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture
def sdk(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    app = create_app(
        Settings(upstream_url=UPSTREAM, max_retries=0), transport=fake.transport(), embedder=FakeEmbedder()
    )
    with TestClient(app) as http:
        yield openai.OpenAI(
            base_url="http://testserver.local/v1", api_key="client-key", http_client=http, max_retries=0
        )


@pytest.fixture
async def async_sdk(fake: FakeUpstream) -> AsyncIterator[openai.AsyncOpenAI]:
    app = create_app(
        Settings(upstream_url=UPSTREAM, max_retries=0), transport=fake.transport(), embedder=FakeEmbedder()
    )
    async with AsyncTestClient(app) as http:
        yield openai.AsyncOpenAI(
            base_url="http://testserver.local/v1", api_key="client-key", http_client=http, max_retries=0
        )


def test_sync_completion(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    result = sdk.chat.completions.create(model="fake-model", messages=MESSAGES)
    assert result.choices[0].message.content == "Paris."
    assert result.usage is not None
    assert result.usage.total_tokens == 12
    assert fake.requests[0].headers["authorization"] == "Bearer client-key"


async def test_async_completion(async_sdk: openai.AsyncOpenAI) -> None:
    result = await async_sdk.chat.completions.create(model="fake-model", messages=MESSAGES)
    assert result.choices[0].message.content == "Paris."


def test_streaming(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body([chunk("Par"), chunk("is."), chunk(finish="stop")])))
    stream = sdk.chat.completions.create(
        model="fake-model", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Paris."
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


async def test_async_streaming(async_sdk: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body([chunk("Ly"), chunk("on"), chunk(finish="stop")])))
    stream = await async_sdk.chat.completions.create(model="fake-model", messages=MESSAGES, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Lyon"


def test_extra_headers_and_extra_body_select_strategies(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    raw = sdk.chat.completions.with_raw_response.create(
        model="fake-model",
        messages=MESSAGES,
        extra_headers={"X-Context-Strategy": "none"},
        extra_body={"context_strategy": "none", "top_k": 3},
    )
    assert raw.headers["x-context-strategy"] == "none"
    assert raw.parse().choices[0].message.content == "Paris."
    assert fake.bodies[0]["top_k"] == 3
    assert "context_strategy" not in fake.bodies[0]


def test_stream_error_event_raises_api_error(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body([chunk("Par")], done=False), fail_after=True))
    stream = sdk.chat.completions.create(model="fake-model", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError, match="upstream connection failed"):
        list(stream)


@pytest.mark.parametrize(
    ("answer", "exception"),
    [
        (httpx.Response(401, json={"error": {"message": "bad key", "type": "auth", "code": "invalid_api_key"}}),
         openai.AuthenticationError),
        (httpx.Response(404, json={"error": {"message": "no model", "type": "x", "code": "model_not_found"}}),
         openai.NotFoundError),
        (httpx.Response(429, json={"error": {"message": "slow down", "type": "x", "code": "rate_limit"}}),
         openai.RateLimitError),
        (httpx.Response(500, json={"error": {"message": "boom", "type": "x", "code": None}}),
         openai.InternalServerError),
        (httpx.ConnectError("refused by fake"), openai.InternalServerError),
        (httpx.ReadTimeout("slow fake"), openai.InternalServerError),
    ],
)  # fmt: skip
def test_upstream_errors_map_to_sdk_exceptions(
    sdk: openai.OpenAI, fake: FakeUpstream, answer: Any, exception: type[Exception]
) -> None:
    fake.queue(answer)
    with pytest.raises(exception):
        sdk.chat.completions.create(model="fake-model", messages=MESSAGES)


def test_proxy_rejections_map_to_bad_request(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(
            model="fake-model", messages=MESSAGES, extra_headers={"X-Context-Strategy": "medoid; k=99"}
        )
    assert caught.value.param == "X-Context-Strategy"
    assert caught.value.code == "invalid_strategy"
    assert fake.requests == []


def test_models_list(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    fake.queue(
        httpx.Response(
            200, json={"object": "list", "data": [{"id": "m1", "object": "model", "created": 0, "owned_by": "fake"}]}
        )
    )
    assert [m.id for m in sdk.models.list()] == ["m1"]


def test_completion_object_is_unchanged(sdk: openai.OpenAI, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("Exactly this.")))
    assert sdk.chat.completions.create(model="fake-model", messages=MESSAGES).model_dump(
        exclude_none=True
    ) == openai.types.chat.ChatCompletion.model_validate(completion("Exactly this.")).model_dump(exclude_none=True)
