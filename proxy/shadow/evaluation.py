"""Shadow evaluation on live traffic. A sampled chat request with documents, once its response has been sent,
is run again in the background: with each candidate pipeline, and with the served pipeline on its documents in
two other orders (reversed; one random permutation). Without ground truth, a record says how often each
candidate agrees with the served answer and what it costs, and whether the served answer depends on where the
documents sit (position sensitivity: the population the strategies exist for). With `shadow_probes` on, it
also asks positional probes built from the request's own documents (proxy.shadow.probes): accuracy by position,
for `none`, the served pipeline and each candidate.

The client never waits for any of it: `submit` only queues (a full queue drops and counts), the work has its own
connection pool and budget, and it is cancelled at shutdown: what it had not finished then is counted `abandoned`
in the last tally, so no sample stays pending.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import anyio
import numpy as np
import structlog

from contextlift.proxy import json_text
from contextlift.proxy.errors import UpstreamError
from contextlift.proxy.observability.metrics import ProxyMetrics
from contextlift.proxy.policy import detected_format
from contextlift.proxy.shadow.budget import Budget
from contextlift.proxy.shadow.case import ShadowAnswer, ShadowCase
from contextlift.proxy.shadow.otlp import OtlpSink
from contextlift.proxy.shadow.probes import (
    ProbePlan,
    captured_probe,
    observe_probe,
    plan_probe,
    probe_record,
    run_probe,
)
from contextlift.proxy.shadow.sink import ShadowSink
from contextlift.proxy.shadow.store import ShadowStore
from contextlift.proxy.shadow.tally import WRITE_SECONDS, ShadowTally, TallyLimits
from contextlift.proxy.upstream.client import UpstreamClient
from contextlift.proxy.upstream.key_guard import credential_guards
from contextlift.proxy.upstream.request import RequestUpstream
from contextlift.strategies import ChatRequest, Completion, Pipeline, Services, UpstreamFailure, run_pipeline
from contextlift.strategies.builtin.medoid import AGREEING_SIMILARITY
from contextlift.strategies.evidence import normalize
from contextlift.strategies.plugin import answer_text, embed_off_loop

log = structlog.get_logger("contextlift.shadow")

_NOT_FOR_SHADOW = ("stream", "stream_options", "n")
"""A shadow call wants one whole answer to compare."""
_STRATEGY_FIELD = "context_strategy"
"""The body field selecting strategies (`proxy.state.STRATEGY_FIELD`), which serving consumed and never sent."""


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
        budget: Budget,
        workers: int,
        queue_size: int,
        sink: ShadowSink | None = None,
        store: ShadowStore | None = None,
        otlp: OtlpSink | None = None,
        capture: bool = False,
        redact: Sequence[str] = (),
        embedder_ready: Callable[[], bool] = lambda: True,
        detect: Callable[[Mapping[str, Any], str | None], ChatRequest] | None = None,
        seed: int | None = None,
        may_call: bool = True,
        probes: bool = False,
        probe_min_documents: int = 3,
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
        self._store = store
        self._otlp = otlp
        self._capture = capture
        self._redact = frozenset(redact)
        self._embedder_ready = embedder_ready
        self._detect = detect
        self._sampler = random.Random(seed)
        self._may_call = may_call
        self._probes = probes
        self._probe_min_documents = probe_min_documents
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self.records = 0
        """Records written (or counted, without a sink) so far."""
        self.tally = ShadowTally(TallyLimits(budget.calls_per_minute, budget.tokens_per_minute, queue_size))
        """What became of every drawn sample: written to the sink and logged, rate-limited."""

    def sampled(self) -> bool:
        """Whether the request now arriving is sampled. Without leave to call (no operator key, and the client's
        own key not to be spent: `shadow_use_client_key`), a drawn sample is counted as skipped, nothing kept."""
        if not (self.rate > 0 and self._sampler.random() < self.rate):
            return False
        self.tally.draw()
        if not self._may_call:
            self._count("skipped-no-key")
            return False
        return True

    def store_status(self) -> dict[str, Any] | None:
        """Whether the shared store is reached (`/readyz`'s detail), where one is named."""
        return None if self._store is None else self._store.status()

    def not_kept(self) -> None:
        """Count a drawn sample that the route kept nothing of (a body over `shadow_max_body_bytes`, several
        choices asked for): it will never be submitted."""
        self._count("not-kept")

    def submit(self, case: ShadowCase, status: int | None, calls: int, tokens: int, seconds: float) -> None:
        """Queue a served request for evaluation; never blocks, never raises."""
        if self._closed:  # its response ended after shutdown began: counted `abandoned` then
            return
        if status != 200 or case.unusable or not case.answer.strip():
            # No answer to compare: an error, an answer this could not read, or one without text (tool calls).
            self._count("not-served")
            return
        try:
            self._queue.put_nowait((case, calls, tokens, seconds))
        except asyncio.QueueFull:
            self._count("dropped-queue")
            return
        self._metrics.shadow_pending.inc()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._work(), name=f"shadow-{i}") for i in range(self._workers)]
        self._tasks.append(asyncio.create_task(self._tell(), name="shadow-tally"))
        if self._store is not None:
            self._tasks.append(asyncio.create_task(self._store.check(), name="shadow-store"))

    async def aclose(self) -> None:
        """Cancel the work in progress and drop what is queued (shutdown must not wait for the upstream); every
        sample not evaluated by then (queued, cut off mid-evaluation, its response still going out) is counted
        `abandoned`, and the last tally is written and logged."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
            self._metrics.shadow_pending.dec()
        if self.tally.pending > 0:
            self._count("abandoned", self.tally.pending)
        await self._upstream.aclose()
        await self.write_tally()
        self.tally.log_if_due(now=True)
        if self._sink is not None:
            self._sink.close()
        if self._store is not None:
            await self._store.aclose()
        if self._otlp is not None:
            await anyio.to_thread.run_sync(self._otlp.close)

    def _count(self, outcome: str, samples: int = 1) -> None:
        self._metrics.shadow_samples.labels(outcome).inc(samples)
        self.tally.count(outcome, samples)

    async def write_tally(self) -> None:
        """Write the tally to the sink now, if it changed (the reporter does every WRITE_SECONDS)."""
        line = self.tally.record()
        if line is not None:
            await self._keep(line, "tally")

    async def _keep(self, record: dict[str, Any], what: str) -> bool:
        """Write `record` to the file sink and to the store's stream, those named, and hand it to the OTLP exporter;
        whether the file or the stream has it (or neither is named: then records are only counted, or exported). A
        file that cannot be written is said without the record (users' content); a store that cannot be reached is
        said once, by the store."""
        if self._otlp is not None:
            self._otlp.write(record)
        kept = self._sink is None and self._store is None
        if self._sink is not None:
            try:
                await anyio.to_thread.run_sync(self._sink.write, record)
                kept = True
            except OSError as error:
                log.warning(f"shadow {what} not written", sink=str(self._sink.path), errno=error.errno,
                            error=type(error).__name__)  # fmt: skip
        if self._store is not None and await self._store.write(record):
            kept = True
        return kept

    async def _tell(self) -> None:
        while True:
            await asyncio.sleep(WRITE_SECONDS)
            await self.write_tally()
            self.tally.log_if_due()

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
                self._count("failed")
                log.warning("shadow evaluation failed", error=f"{type(error).__name__}: {error}")
            finally:
                self._queue.task_done()
                self._metrics.shadow_pending.dec()

    async def _evaluate(self, case: ShadowCase, served_calls: int, served_tokens: int, served_seconds: float) -> None:
        found = await self._documents(case)
        if found is None or not found.documents:
            self._count("no-documents")
            return
        body = found.body
        request = replace(found, body={k: v for k, v in found.body.items() if k not in _NOT_FOR_SHADOW})
        seed = _seed_of(request)
        orders = _other_orders(len(request.documents), seed)
        served_calls_each = case.served.max_upstream_calls()
        # A candidate that is the served pipeline would be compared with itself: the control already asks it again.
        candidates = [(label, p) for label, p in self.candidates if label != case.served.label]
        planned = sum(p.max_upstream_calls() for _, p in candidates) + (1 + len(orders)) * served_calls_each
        probe: ProbePlan | None = None
        if self._probes:
            # Building it is in proportion to the request (its text is searched for fresh names): off the loop.
            probe = await anyio.to_thread.run_sync(
                plan_probe, request, case.served, candidates, seed, self._probe_min_documents
            )
            planned += probe.calls if probe is not None else 0
        self.tally.plan(planned)
        if self._sink is None and self._otlp is None and self._store is not None and not self._store.may_answer():
            # The store is its records' only place and cannot be reached: spending on them would lose them.
            self._count("sink-failed")
            return
        # The served request's own tokens per call are the best estimate of a shadow call's.
        estimate = planned * max(1, served_tokens // max(1, served_calls))
        taken = await self._budget.take(planned, estimate)
        if taken is None:
            self._count("dropped-budget")
            return
        runs: list[tuple[str, Pipeline, ChatRequest]] = [(label, p, request) for label, p in candidates]
        # The control: the served pipeline again, documents in their order, rendered as the reorders are. A served
        # answer that the control does not reproduce (sampling, a medoid vote, a rendering that differs) makes the
        # request's position sensitivity unknown rather than counted.
        runs.append(("order=same", case.served, request))
        for name, order in orders:
            moved = request.with_documents([request.documents[i] for i in order])
            runs.append((f"order={name}", case.served, moved))
        answers = [await self._ask(pipeline, asked, case) for _, pipeline, asked in runs]
        probed = await run_probe(probe, lambda p, asked: self._ask(p, asked, case)) if probe is not None else []
        spent = sum(a.tokens for a in (*answers, *probed))
        await self._budget.correct(taken, spent)
        similarities = await self._similarities(case.answer, [a.text for a in answers])
        record = await anyio.to_thread.run_sync(
            self._record,
            case,
            body,
            request,
            (served_calls, served_tokens, served_seconds),
            runs,
            answers,
            similarities,
            len(candidates),
        )
        if probe is not None:
            record["probe"] = probe_record(probe, probed)
            if self._capture:
                record["captured"]["probe"] = captured_probe(probe, probed, self._blanker(case))
            observe_probe(self._metrics, case.model, probe, record["probe"])
        self._observe(record, case)
        if not await self._keep(record, "record"):  # a full disk, a store gone: counted, not evaluated
            self._count("sink-failed")
            return
        self.records += 1
        self._count("evaluated")

    async def _documents(self, case: ShadowCase) -> ChatRequest | None:
        """The request parsed from its bytes again, its documents found as serving looked for them, off the event
        loop."""
        if self._detect is None:
            return None
        detect = self._detect

        def parsed() -> ChatRequest | None:
            body = json_text.loads(case.raw)
            if not isinstance(body, dict):
                return None
            body.pop(_STRATEGY_FIELD, None)
            return detect(body, case.shape)

        try:
            return await anyio.to_thread.run_sync(parsed)
        except Exception:  # a body detection refuses (over the document limits) is one the shadow skips
            return None

    async def _ask(self, pipeline: Pipeline, request: ChatRequest, case: ShadowCase) -> ShadowAnswer:
        upstream = RequestUpstream(
            self._upstream,
            case.inbound_headers,
            max(1, pipeline.max_upstream_calls()),
            retry_budget=0,
            query=case.query,
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
        body: Mapping[str, Any],
        request: ChatRequest,
        served_cost: tuple[int, int, float],
        runs: list[tuple[str, Pipeline, ChatRequest]],
        answers: list[ShadowAnswer],
        similarities: list[float | None],
        asked: int,
    ) -> dict[str, Any]:
        """The shadow record; `asked`: how many of `runs` are candidates (those that were not the served one)."""
        served_calls, served_tokens, served_seconds = served_cost
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
        candidates = rows[:asked]
        control, position = rows[asked], rows[asked + 1 :]
        answered = [row for row in position if row["error"] is None]
        # Sensitive: the control reproduced the served answer and a reorder did not; without a reproducing control
        # (or any reorder answered) the request's sensitivity is unknown.
        sensitive = any(not row["agrees"] for row in answered) if control["agrees"] and answered else None
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "request": _digest(json_text.dumps(body, compact=True)),
            "model": (case.model or "")[:200],
            "format": detected_format(request),
            "documents": len(request.documents),
            "served": case.served.label,
            "served_margin": None if case.served_margin is None else round(case.served_margin, 4),
            "answer": _digest(served),
            "calls": served_calls,
            "tokens": served_tokens,
            "seconds": round(served_seconds, 4),
            "candidates": candidates,
            **({"served_as_candidate": True} if asked < len(self.candidates) else {}),
            "control": control,
            "position": position,
            "position_sensitive": sensitive,
        }
        if self._capture:
            blank = self._blanker(case)
            kept = {k: v for k, v in body.items() if k not in self._redact}
            record["captured"] = {
                "body": json_text.loads(blank(json_text.dumps(kept, compact=True))),
                "served": blank(case.answer),
                "answers": [blank(a.text) for a in answers],
            }
        return record

    def _blanker(self, case: ShadowCase) -> Callable[[str], str]:
        """Headers are never written. A key can still be in a body or an answer (a client that pasted it, an
        upstream that echoes it): the operator's key and every credential the client sent (any header
        `credential_guards` counts as one) are blanked from captured text."""
        guards = [self._upstream.guard(self._upstream.forwarded(case.inbound_headers))]
        guards += credential_guards(case.inbound_headers)

        def blank(text: str) -> str:
            for guard in guards:
                text = guard.blank_text(text)
            return text

        return blank

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


def _seed_of(request: ChatRequest) -> int:
    """The same request draws the same permutation; the documents' openings are enough to tell requests apart
    and cost nothing in proportion to their size."""
    openings = "\0".join(d.text[:256] for d in request.documents)
    return int(hashlib.sha256(openings.encode()).hexdigest()[:8], 16)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
