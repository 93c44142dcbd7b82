"""Test doubles for the upstream. Each is a fake: it replays scripted answers and records what it received."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx


def completion(content: str = "Paris.", *, prompt_tokens: int = 10, completion_tokens: int = 2) -> dict[str, Any]:
    """A chat completion body as OpenAI returns it."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def chunk(content: str | None = None, *, finish: str | None = None, usage: dict[str, int] | None = None) -> str:
    """One chat completion chunk's JSON."""
    choices = [] if usage else [{"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}]
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake-model",
        "choices": choices,
    }
    if usage:
        body["usage"] = usage
    return json.dumps(body)


def sse_body(events: Iterable[str], *, done: bool = True) -> bytes:
    """An SSE body of these data payloads, then `[DONE]` unless `done` is false."""
    frames = "".join(f"data: {e}\n\n" for e in events)
    return (frames + ("data: [DONE]\n\n" if done else "")).encode()


async def _chunks(pieces: list[bytes], delay: float, fail_after: bool) -> AsyncIterator[bytes]:
    for piece in pieces:
        if delay:
            await asyncio.sleep(delay)
        yield piece
    if fail_after:
        raise httpx.ReadError("connection reset by fake")


def sse_response(
    body: bytes,
    *,
    split_at: Iterable[int] = (),
    delay: float = 0.0,
    fail_after: bool = False,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """A streamed SSE response whose bytes arrive in pieces cut at `split_at` offsets."""
    cuts = [0, *sorted(set(split_at)), len(body)]
    pieces = [body[a:b] for a, b in itertools.pairwise(cuts) if b > a]
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream", **(headers or {})},
        content=_chunks(pieces, delay, fail_after),
    )


def streamed_json(payload: Any) -> httpx.Response:
    """A JSON answer whose body is still to read, as a network gives it (a mock transport's bytes come read)."""

    async def body() -> AsyncIterator[bytes]:
        yield json.dumps(payload).encode()

    return httpx.Response(200, headers={"content-type": "application/json"}, content=body())


async def never_answers(request: httpx.Request) -> httpx.Response:
    """An upstream answer that never comes (within any test's time)."""
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


def stalls_after_one_event(request: httpx.Request) -> httpx.Response:
    """A stream that sends one chunk (`chunk("one")`) and then nothing, never ending."""

    async def events() -> AsyncIterator[bytes]:
        yield f"data: {chunk('one')}\n\n".encode()
        await asyncio.sleep(3600)

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())


Answer = httpx.Response | Exception | Callable[[httpx.Request], Any]


@dataclass
class FakeUpstream:
    """A scripted fake OpenAI-compatible upstream: answers are queued; every request is recorded.

    With an empty queue it answers every chat request with `completion()`.
    """

    answers: list[Answer] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    def queue(self, *answers: Answer) -> FakeUpstream:
        self.answers.extend(answers)
        return self

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.content]

    async def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        await request.aread()
        answer: Answer = self.answers.pop(0) if self.answers else httpx.Response(200, json=completion())
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            result = answer(request)
            if asyncio.iscoroutine(result):
                result = await result
            return result  # type: ignore[no-any-return]
        return answer

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


class FakeEmbedder:
    """A fake embedder: bag of lower-cased words hashed into 64 dimensions, L2-normalised. Texts sharing
    words are similar, which is all the strategy tests need to know the expected ranking."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Any) -> Any:
        import re
        import zlib

        import numpy as np

        self.calls.append(list(texts))
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[row, zlib.crc32(word.encode()) % 64] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms == 0, 1, norms)
