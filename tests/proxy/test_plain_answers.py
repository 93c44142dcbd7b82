"""The chat route's plain answers (a `Response` of bytes) are written by the proxy itself: the same status, head and
body, byte for byte, as litestar's own way (the route's response handler and `ASGIResponse`) writes them; any other
answer (a stream, cookies, a background task, a status without a body) still goes litestar's way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from litestar import MediaType, Request, Response
from litestar.background_tasks import BackgroundTask
from litestar.response import Stream

from contextlift.proxy import Settings, create_app
from contextlift.proxy.app import ProxyApp, _plain_answer
from tests.fakes import FakeUpstream

APP = create_app(Settings(upstream_url="http://upstream.test/v1"), transport=FakeUpstream().transport())
assert isinstance(APP, ProxyApp)


def litestars_way(answer: Response[Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """What the registered chat route's response handler sends for `answer`."""
    handler = APP._chat_handler
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def write() -> None:
        scope: Any = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [], "app": APP}
        request: Request[Any, Any, Any] = Request(scope)
        asgi = await handler.to_response(app=APP, data=answer, request=request)
        await asgi(scope, None, send)  # type: ignore[arg-type]

    asyncio.run(write())
    start, body = sent
    assert body["more_body"] is False
    return start["status"], list(start["headers"]), body["body"]


def proxys_way(answer: Response[Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
    handler = APP._chat_handler
    return _plain_answer(answer, handler.media_type, handler.status_code)


ANSWERS = [
    Response(b'{"id": "x"}', media_type="application/json", headers={"X-A": "1", "openai-processing-ms": "5"}),
    Response(b"", status_code=499),
    Response(b"text", media_type="text/plain"),
    Response(b"x", media_type=MediaType.JSON, headers={"Content-Type": "application/x-custom"}),
    Response(b"xy", headers={"content-length": "2", "X-Title": "caf\xe9"}),
    Response(b'{"error": {}}', status_code=502, headers={"retry-after": "1"}),
]


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_plain_answer_goes_out_as_litestar_writes_it(answer: Response[Any]) -> None:
    assert APP._plain_answers
    assert proxys_way(answer) == litestars_way(answer)


_VALUES = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=8)


@given(
    content=st.binary(max_size=16),
    status=st.sampled_from([None, 200, 201, 400, 429, 499, 502]),
    media_type=st.sampled_from([None, "application/json", "text/plain", "text/event-stream", MediaType.JSON]),
    headers=st.dictionaries(st.sampled_from(["X-A", "x-b", "Content-Type", "content-length", "Retry-After"]), _VALUES),
)
def test_any_plain_answer_goes_out_as_litestar_writes_it(
    content: bytes, status: int | None, media_type: Any, headers: dict[str, str]
) -> None:
    answer = Response(content, status_code=status, media_type=media_type, headers=headers)
    assert proxys_way(answer) == litestars_way(answer)


@pytest.mark.parametrize(
    "answer",
    [
        Stream(iter([b"data: {}\n\n"]), media_type="text/event-stream"),
        Response(b"x", cookies={"session": "a"}),
        Response(b"x", background=BackgroundTask(lambda: None)),
        Response({"a": 1}),
        Response("text"),
        Response(b"", status_code=204),
        Response(b"", status_code=304),
        Response(b"x", encoding="latin-1"),
    ],
)
def test_any_other_answer_goes_litestars_way(answer: Any) -> None:
    assert proxys_way(answer) is None
