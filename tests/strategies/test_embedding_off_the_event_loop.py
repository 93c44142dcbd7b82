"""Embedding runs in worker threads in bounded batches, so it never blocks the event loop, and a cancelled
request stops after the batch in progress instead of embedding every remaining document."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.embedder import EMBED_BATCH, embed_off_loop
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import ScriptedUpstream


class SlowFakeEmbedder:
    """A fake embedder that takes `seconds` per call and records each batch and the thread it ran on."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.batches: list[int] = []
        self.threads: set[int] = set()
        self.started = threading.Event()
        self._inner = FakeEmbedder()

    def embed(self, texts: Any) -> Any:
        self.batches.append(len(texts))
        self.threads.add(threading.get_ident())
        self.started.set()
        time.sleep(self.seconds)
        return self._inner.embed(texts)


class ThreadRecordingFakeTokenizer:
    """A fake tokenizer: one token per word, and the threads it was called on."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def count(self, text: str) -> int:
        self.threads.add(threading.get_ident())
        return len(text.split())


def tiny_documents(count: int) -> dict[str, Any]:
    lines = "\n".join(f"Document [{i}] passage {i}" for i in range(1, count + 1))
    return {"model": "m", "messages": [{"role": "user", "content": f"{lines}\n\nQuestion: passage 7?"}]}


async def test_batches_of_at_most_the_batch_size_give_the_same_vectors_as_one_call() -> None:
    texts = [f"text number {i} about cats" if i % 3 else f"dogs {i}" for i in range(2 * EMBED_BATCH + 5)]
    embedder = SlowFakeEmbedder()
    vectors = await embed_off_loop(embedder, texts)
    assert embedder.batches == [EMBED_BATCH, EMBED_BATCH, 5]
    assert np.array_equal(vectors, FakeEmbedder().embed(texts))


async def test_embedding_and_token_counts_run_off_the_event_loop() -> None:
    embedder, tokenizer = SlowFakeEmbedder(), ThreadRecordingFakeTokenizer()
    pipeline = build_registry().resolve(parse_selection("reorder; budget=50; ranker=minilm"), {})
    services = Services(embedder=embedder, tokenizer=tokenizer)
    await run_pipeline(pipeline, parse_request(tiny_documents(300)), ScriptedUpstream("ok"), services)
    loop_thread = threading.get_ident()
    assert embedder.threads
    assert tokenizer.threads
    assert loop_thread not in embedder.threads | tokenizer.threads


async def test_a_cancelled_reorder_stops_after_the_batch_in_progress() -> None:
    # 20,000 tiny documents kept a core busy for minutes after the client had gone.
    embedder = SlowFakeEmbedder(seconds=0.2)
    pipeline = build_registry().resolve(parse_selection("reorder; ranker=minilm"), {})
    request = parse_request(tiny_documents(20_000))
    task = asyncio.create_task(run_pipeline(pipeline, request, ScriptedUpstream("ok"), Services(embedder=embedder)))
    assert await asyncio.to_thread(embedder.started.wait, 5)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=5)
    assert task in done
    assert task.cancelled()
    await asyncio.sleep(0.5)  # time for further batches, were any started
    assert len(embedder.batches) == 1
    assert embedder.batches[0] <= EMBED_BATCH
