"""A service ranker reads what a hostile or broken service answers within bounds, and counts it right: a
compressed answer inflates only as far as the size limit (and one layer of encoding at most), a number no float
holds is a `bad-answer` like any malformed answer, vectors are checked before they are cached, the cache is
bounded by bytes and follows the service to a new vector length, and a cancelled ranking is no outcome for the
circuit. Each service here is a scripted fake behind `httpx.MockTransport`, handed to the ranker as its client."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from contextlift.proxy.remote_rankers import RankerSetting, ServiceRanker
from contextlift.strategies.rankers import RankerFailure
from contextlift.strategies.request import Document

DOCUMENTS = [Document(f"document number {i}") for i in range(3)]
HUGE_INTEGER = "1" + "0" * 400
"""Valid JSON, and past any float: `float()` of it raises OverflowError."""

Answer = Callable[[httpx.Request], httpx.Response]


def ranker(answer: Answer, kind: str = "rerank", **setting: Any) -> ServiceRanker:
    """A ranker whose service is the scripted fake `answer`."""
    made = ServiceRanker("svc", RankerSetting(kind=kind, url="http://ranker.test/x", **setting))  # type: ignore[arg-type]

    async def handler(request: httpx.Request) -> httpx.Response:
        return answer(request)

    made._client = httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)
    return made


async def reason(ranking: ServiceRanker, documents: list[Document] = DOCUMENTS) -> str | None:
    try:
        await ranking.scores("which document", documents, None)  # type: ignore[arg-type]
    except RankerFailure as failure:
        return failure.reason
    return None


def json_answer(raw: bytes, **headers: str) -> httpx.Response:
    """As a network answer arrives: a stream (bytes given whole, httpx would read and inflate them at once, here)."""

    async def sent() -> AsyncIterator[bytes]:
        yield raw

    return httpx.Response(200, headers={"content-type": "application/json", **headers}, content=sent())


def gzip_bomb(inflated_bytes: int) -> bytes:
    """Spaces (valid JSON padding) gzipped: about a thousandth of what they inflate to."""
    return gzip.compress(b"[" + b" " * inflated_bytes + b"]", compresslevel=9)


async def test_a_compressed_answer_inflates_only_as_far_as_the_limit() -> None:
    bomb = gzip_bomb(64 * 1024 * 1024)
    service = ranker(lambda _: json_answer(bomb, **{"content-encoding": "gzip"}), max_response_bytes=1024 * 1024)
    tracemalloc.start()
    try:
        failed = await reason(service)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(bomb) < 1024 * 1024 < 64 * 1024 * 1024  # small as sent: only the inflated size can catch it
    assert failed == "oversized"
    assert peak < 16 * 1024 * 1024  # the whole inflated answer (64 MiB) was never held


async def test_stacked_encodings_are_refused_before_any_inflating() -> None:
    twice = gzip.compress(gzip_bomb(8 * 1024 * 1024))
    service = ranker(lambda _: json_answer(twice, **{"content-encoding": "gzip, gzip"}))
    assert await reason(service) == "bad-answer"


async def test_a_compressed_answer_within_the_limit_is_read() -> None:
    scores = [{"index": i, "relevance_score": float(i)} for i in range(3)]
    packed = gzip.compress(json.dumps({"results": scores}).encode())
    service = ranker(lambda _: json_answer(packed, **{"content-encoding": "gzip"}))
    assert await service.scores("q", DOCUMENTS, None) == [0.0, 1.0, 2.0]  # type: ignore[arg-type]


def overflowing_rerank(_: httpx.Request) -> httpx.Response:
    rows = ", ".join(f'{{"index": {i}, "relevance_score": {HUGE_INTEGER if i == 1 else 1}}}' for i in range(3))
    return json_answer(f'{{"results": [{rows}]}}'.encode())


def overflowing_embeddings(request: httpx.Request) -> httpx.Response:
    count = len(json.loads(request.content)["input"])
    rows = ", ".join(f'{{"index": {i}, "embedding": [1, {HUGE_INTEGER}, 0]}}' for i in range(count))
    return json_answer(f'{{"data": [{rows}]}}'.encode())


@pytest.mark.parametrize(("kind", "answer"), [("rerank", overflowing_rerank), ("embeddings", overflowing_embeddings)])
async def test_an_integer_no_float_holds_is_a_bad_answer_and_a_failure(kind: str, answer: Answer) -> None:
    service = ranker(answer, kind=kind, failure_threshold=2)
    assert [await reason(service) for _ in range(3)] == ["bad-answer", "bad-answer", "circuit-open"]


def embeddings_of_length(length: list[int], seen: list[list[str]]) -> Answer:
    """A fake embeddings service whose vectors are `length[0]` long (a list, so a test can change its model)."""

    def answer(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        seen.append(texts)
        data = [
            {"index": i, "embedding": [float(len(t) % 7 + j) for j in range(length[0])]} for i, t in enumerate(texts)
        ]
        return json_answer(json.dumps({"data": data}).encode())

    return answer


async def test_a_new_vector_length_replaces_the_cached_vectors() -> None:
    length, seen = [4], []
    service = ranker(embeddings_of_length(length, seen), kind="embeddings")
    assert await reason(service) is None
    length[0] = 8  # the service now runs another model
    # A question not cached yet, the documents cached at length 4: those are asked for again, not a fallback.
    assert await reason(service, [*DOCUMENTS, Document("one more")]) is None
    assert await reason(service) is None
    assert {len(v) for v in service._vectors.values()} == {8}
    assert len(seen) == 3  # the new texts, then the stale documents once, then everything from the cache


async def test_vectors_of_different_lengths_are_refused_before_they_are_cached() -> None:
    def ragged(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": [1.0] * (4 + i)} for i in range(len(texts))]
        return json_answer(json.dumps({"data": data}).encode())

    service = ranker(ragged, kind="embeddings")
    assert await reason(service) == "bad-answer"
    assert len(service._vectors) == 0


async def test_the_embeddings_cache_is_bounded_by_bytes() -> None:
    length, seen = [250_000], []
    service = ranker(
        embeddings_of_length(length, seen),
        kind="embeddings",
        max_response_bytes=64 * 1024 * 1024,
        cache_bytes=2 * 1024 * 1024,
    )
    assert await reason(service) is None
    held = sum(v.nbytes for v in service._vectors.values())
    assert 0 < held <= 2 * 1024 * 1024  # two of the four 1 MB vectors, where the count alone kept all four
    assert len(service._vectors) == 2


async def test_a_cancelled_ranking_does_not_close_the_circuit() -> None:
    started = asyncio.Event()
    answers = ["fail", "hang", "fail"]

    async def scripted(request: httpx.Request) -> httpx.Response:
        step = answers.pop(0) if answers else "fail"
        if step == "hang":
            started.set()
            await asyncio.sleep(60)
        return httpx.Response(503, json={"error": "down"})

    service = ServiceRanker(
        "svc", RankerSetting(kind="rerank", url="http://ranker.test/x", failure_threshold=2, timeout=30)
    )
    service._client = httpx.AsyncClient(transport=httpx.MockTransport(scripted), follow_redirects=False)
    assert await reason(service) == "http-5xx"
    hanging = asyncio.ensure_future(reason(service))
    await started.wait()
    hanging.cancel()  # the client left
    await asyncio.gather(hanging, return_exceptions=True)
    assert await reason(service) == "http-5xx"  # the second failure in a row: the cancellation counted for nothing
    assert await reason(service) == "circuit-open"
