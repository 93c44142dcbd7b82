"""Shadow evaluation on live traffic. A sampled chat request with documents, once its response has been sent,
is run again in the background: with each candidate pipeline, and with the served pipeline on its documents in
two other orders (reversed; one random permutation). Without ground truth, a record says how often each
candidate agrees with the served answer and what it costs, and whether the served answer depends on where the
documents sit (position sensitivity: the population the strategies exist for).

The client never waits for any of it: `submit` only queues (a full queue drops and counts), the work has its own
connection pool and budget, and it is cancelled at shutdown.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import anyio
import numpy as np
import structlog

from proxy import json_text
from proxy.errors import UpstreamError
from proxy.metrics import ProxyMetrics
from proxy.request_upstream import RequestUpstream
from proxy.shadow_case import ShadowCase
from proxy.shadow_sink import ShadowSink
from proxy.upstream import UpstreamClient
from strategies import ChatRequest, Completion, Pipeline, Services, UpstreamFailure, run_pipeline
from strategies.evidence import normalize
from strategies.medoid import AGREEING_SIMILARITY
from strategies.plugin import answer_text, embed_off_loop

log = structlog.get_logger("contextlift.shadow")

_NOT_FOR_SHADOW = ("stream", "stream_options", "n")
"""A shadow call wants one whole answer to compare."""


@dataclass(frozen=True, slots=True)
class ShadowAnswer:
    text: str
    calls: int
    tokens: int
    seconds: float
    error: str | None = None


class ShadowBudget:
    """Shadow calls and tokens per minute: a sample that would go past either is dropped."""

    def __init__(self, calls_per_minute: int, tokens_per_minute: int, clock: Callable[[], float] = time.monotonic):
        self._calls_limit = calls_per_minute
        self._tokens_limit = tokens_per_minute
        self._clock = clock
        self._window = -1
        self._calls = 0
        self._tokens = 0

    def take(self, calls: int) -> bool:
        """Reserve `calls` in this minute, if they fit and the minute's tokens are not spent."""
        self._roll()
        if self._calls + calls > self._calls_limit or self._tokens >= self._tokens_limit:
            return False
        self._calls += calls
        return True

    def spend_tokens(self, tokens: int) -> None:
        self._roll()
        self._tokens += tokens

    def _roll(self) -> None:
        window = int(self._clock() // 60)
        if window != self._window:
            self._window, self._calls, self._tokens = window, 0, 0


class Shadow:
    """The queue of sampled requests and the workers that evaluate them."""

    def __init__(
        self,
        *,
        rate: float,
        candidates: Sequence[tuple[str, Pipeline]],
        upstream: UpstreamClient,
        services: Services,
        metrics: ProxyMetrics,
        budget: ShadowBudget,
        workers: int,
        queue_size: int,
        sink: ShadowSink | None = None,
        capture: bool = False,
        redact: Sequence[str] = (),
        embedder_ready: Callable[[], bool] = lambda: True,
        seed: int | None = None,
    ) -> None:
        self.rate = rate
        self.candidates = tuple(candidates)
        self._upstream = upstream
        self._services = services
        self._metrics = metrics
        self._budget = budget
        self._workers = workers
        self._queue: asyncio.Queue[tuple[ShadowCase, int, int, float]] = asyncio.Queue(queue_size)
        self._sink = sink
        self._capture = capture
        self._redact = frozenset(redact)
        self._embedder_ready = embedder_ready
        self._sampler = random.Random(seed)
        self._tasks: list[asyncio.Task[None]] = []
        self.records = 0
        """Records written (or counted, without a sink) so far."""

    def sampled(self) -> bool:
        """Whether the request now arriving is sampled."""
        return self.rate > 0 and self._sampler.random() < self.rate

    def submit(self, case: ShadowCase, status: int | None, calls: int, tokens: int, seconds: float) -> None:
        """Queue a served request for evaluation; never blocks, never raises."""
        if status != 200 or not case.pieces:
            self._metrics.shadow_samples.labels("not-served").inc()
            return
        try:
            self._queue.put_nowait((case, calls, tokens, seconds))
        except asyncio.QueueFull:
            self._metrics.shadow_samples.labels("dropped-queue").inc()
            return
        self._metrics.shadow_pending.inc()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._work(), name=f"shadow-{i}") for i in range(self._workers)]

    async def aclose(self) -> None:
        """Cancel the work in progress and drop what is queued (shutdown must not wait for the upstream)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self._upstream.aclose()
        if self._sink is not None:
            self._sink.close()

    async def join(self) -> None:
        """Wait until everything queued has been evaluated (tests, and the end-to-end replay)."""
        await self._queue.join()

    async def _work(self) -> None:
        while True:
            case, calls, tokens, seconds = await self._queue.get()
            try:
                await self._evaluate(case, calls, tokens, seconds)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a shadow failure is logged and counted, never the client's problem
                self._metrics.shadow_samples.labels("failed").inc()
                log.warning("shadow evaluation failed", error=f"{type(error).__name__}: {error}")
            finally:
                self._queue.task_done()
                self._metrics.shadow_pending.dec()

    async def _evaluate(self, case: ShadowCase, served_calls: int, served_tokens: int, served_seconds: float) -> None:
        request = replace(case.request, body={k: v for k, v in case.request.body.items() if k not in _NOT_FOR_SHADOW})
        orders = _other_orders(len(request.documents), _seed_of(case))
        planned = (
            sum(p.max_upstream_calls() for _, p in self.candidates) + len(orders) * case.served.max_upstream_calls()
        )
        if not self._budget.take(planned):
            self._metrics.shadow_samples.labels("dropped-budget").inc()
            return
        runs: list[tuple[str, Pipeline, ChatRequest]] = [(label, p, request) for label, p in self.candidates]
        for name, order in orders:
            moved = request.with_documents([request.documents[i] for i in order])
            runs.append((f"order={name}", case.served, moved))
        answers = [await self._ask(pipeline, asked, case) for _, pipeline, asked in runs]
        self._budget.spend_tokens(sum(a.tokens for a in answers))
        similarities = await self._similarities(case.answer, [a.text for a in answers])
        record = await anyio.to_thread.run_sync(
            self._record, case, served_calls, served_tokens, served_seconds, runs, answers, similarities
        )
        self._observe(record, case)
        if self._sink is not None:
            await anyio.to_thread.run_sync(self._sink.write, record)
        self.records += 1
        self._metrics.shadow_samples.labels("evaluated").inc()

    async def _ask(self, pipeline: Pipeline, request: ChatRequest, case: ShadowCase) -> ShadowAnswer:
        upstream = RequestUpstream(
            self._upstream, case.inbound_headers, max(1, pipeline.max_upstream_calls()), retry_budget=0
        )
        started = time.perf_counter()
        try:
            result = await run_pipeline(pipeline, request, upstream, self._services)
            outcome = result.outcome
            text = answer_text(outcome) if isinstance(outcome, Completion) else ""
            error = None
        except (UpstreamError, UpstreamFailure) as failure:
            text, error = "", getattr(failure, "code", type(failure).__name__)
        seconds = time.perf_counter() - started
        tokens = upstream.ledger.usage.get("total_tokens", 0)
        return ShadowAnswer(text, upstream.ledger.calls, tokens, seconds, error)

    async def _similarities(self, served: str, answers: list[str]) -> list[float | None]:
        """Cosine similarity of each answer to the served one, with the embedder the proxy already loaded."""
        embedder = self._services.embedder
        if embedder is None or not self._embedder_ready():
            return [None] * len(answers)
        vectors = np.asarray(await embed_off_loop(embedder, [served, *answers]), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1)
        norms[norms == 0] = 1.0
        unit = vectors / norms[:, None]
        return [round(float(unit[0] @ unit[i + 1]), 4) for i in range(len(answers))]

    def _record(
        self,
        case: ShadowCase,
        served_calls: int,
        served_tokens: int,
        served_seconds: float,
        runs: list[tuple[str, Pipeline, ChatRequest]],
        answers: list[ShadowAnswer],
        similarities: list[float | None],
    ) -> dict[str, Any]:
        served = normalize(case.answer)
        rows = []
        for (label, _, _), answer, similarity in zip(runs, answers, similarities, strict=True):
            exact = answer.error is None and normalize(answer.text) == served
            rows.append({
                "strategy": label,
                "answer": _digest(normalize(answer.text)) if answer.error is None else None,
                "exact": exact,
                "similarity": similarity,
                "agrees": answer.error is None and (exact or (similarity or 0.0) >= AGREEING_SIMILARITY),
                "calls": answer.calls,
                "tokens": answer.tokens,
                "seconds": round(answer.seconds, 4),
                "error": answer.error,
            })  # fmt: skip
        candidates = rows[: len(self.candidates)]
        position = rows[len(self.candidates) :]
        answered = [row for row in position if row["error"] is None]
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "request": _digest(json_text.dumps(case.request.body, compact=True)),
            "model": (case.model or "")[:200],
            "documents": len(case.request.documents),
            "served": case.served.label,
            "answer": _digest(served),
            "calls": served_calls,
            "tokens": served_tokens,
            "seconds": round(served_seconds, 4),
            "candidates": candidates,
            "position": position,
            "position_sensitive": any(not row["agrees"] for row in answered) if answered else None,
        }
        if self._capture:
            # The body never holds the key (headers do, and are never written); an answer may echo it: blanked.
            guard = self._upstream.guard(self._upstream.forwarded(case.inbound_headers))
            body = {k: v for k, v in case.request.render().items() if k not in self._redact}
            record["captured"] = {
                "body": json_text.loads(guard.blank(json_text.dumps(body, compact=True).encode())),
                "served": guard.blank_text(case.answer),
                "answers": [guard.blank_text(a.text) for a in answers],
            }
        return record

    def _observe(self, record: dict[str, Any], case: ShadowCase) -> None:
        metrics = self._metrics
        for row in record["candidates"]:
            outcome = "error" if row["error"] else "agrees" if row["agrees"] else "differs"
            metrics.shadow_agreement.labels(row["strategy"], outcome).inc()
            metrics.shadow_calls.labels(row["strategy"]).inc(row["calls"])
            if record["seconds"] > 0 and not row["error"]:
                metrics.shadow_latency_ratio.labels(row["strategy"]).observe(row["seconds"] / record["seconds"])
        sensitive = record["position_sensitive"]
        label = "unknown" if sensitive is None else "sensitive" if sensitive else "stable"
        metrics.shadow_position.labels(metrics.model_label(case.model), label).inc()


def _other_orders(count: int, seed: int) -> list[tuple[str, list[int]]]:
    """The documents reversed, and one random permutation other than the served order (when there is one)."""
    if count < 2:
        return []
    served = list(range(count))
    permuted = served[:]
    rng = random.Random(seed)
    for _ in range(8):
        rng.shuffle(permuted)
        if permuted != served:
            break
    return [("reversed", served[::-1]), ("permuted", permuted)]


def _seed_of(case: ShadowCase) -> int:
    """The same request draws the same permutation; the documents' openings are enough to tell requests apart
    and cost nothing in proportion to their size."""
    openings = "\0".join(d.text[:256] for d in case.request.documents)
    return int(hashlib.sha256(openings.encode()).hexdigest()[:8], 16)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
