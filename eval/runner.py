"""Sends every case through the proxy over HTTP, once per strategy, exactly as a client would: the chat
completions route, the strategy in `X-Context-Strategy`, the key (if any) as a bearer token. Retries what a
client would retry, caches every final answer, and never writes the key anywhere."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from contextlift.eval.cache import Answer, ResponseCache, request_key
from contextlift.eval.cases import REASKED, Case, Sample
from contextlift.eval.metrics import (
    AGREEMENT_METRIC,
    best_subspan_em,
    normalize_answer,
    numeric_match,
    substring_match,
    value_recall,
)
from contextlift.eval.progress import Progress

STRATEGY_HEADER = "X-Context-Strategy"
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Target:
    """The proxy the cases go through and what a client of it would send."""

    base_url: str
    """Up to and including `/v1`."""
    model: str = "local"
    api_key: str | None = None
    timeout: float = 600.0
    retries: int = 3
    backoff: float = 2.0
    upstream: str | None = None
    """The fingerprint of the upstream behind the proxy, written with each answer."""
    run: str | None = None
    """This run's id, written with each answer it asks."""


_NOT_REPLAYED = ("model", "stream", "stream_options", "n", "context_strategy")
"""Fields of a captured body a replay sets itself: the model under test, one whole answer, the strategy header."""


def request_body(case: Case, model: str) -> dict[str, Any]:
    if case.body is not None:
        return {"model": model, **{k: v for k, v in case.body.items() if k not in _NOT_REPLAYED}}
    return {
        "model": model,
        "messages": case.messages,
        "max_tokens": case.max_tokens,
        "temperature": case.temperature,
    }


def score(metric: str, answer: str, gold: Sequence[str]) -> float:
    """The case's metric on one answer."""
    if metric == "best_subspan_em":
        return best_subspan_em(answer, gold)
    if metric == "substring":
        return max(substring_match(answer, g) for g in gold)
    if metric == "numeric_match":
        return numeric_match(answer, float(gold[0]))
    if metric == "value_recall":
        return value_recall(answer, gold)
    if metric == "same_answer":
        return float(normalize_answer(answer) == normalize_answer(gold[0]))
    raise ValueError(f"unknown metric {metric!r}")


def jobs(cases: Iterable[Case], strategies: Sequence[str], reasked: int = 0, seed: int = 0) -> list[tuple[Case, str]]:
    """Every (case, strategy) to send: each requested strategy, or the case's own list (baselines, controls); then,
    last so that other prompts come between the two askings, `none` again on up to `reasked` cases per task and
    variant where the run compares strategies with `none` (the A/A arm, `REASKED`), drawn with `seed`."""
    cases = list(cases)
    work = [(case, strategy) for case in cases for strategy in (case.strategies or strategies)]
    with_none: dict[tuple[str, str], list[Case]] = {}
    if "none" in strategies and len(strategies) > 1:
        for case in cases:
            # A baseline's own cases (closed-book, oracle) have no lift to set a floor for, nor has a replay's
            # agreement with the served answer.
            if not case.strategies and case.metric != AGREEMENT_METRIC:
                with_none.setdefault((case.task, case.variant), []).append(case)
    for (task, variant), group in with_none.items():
        group = sorted(group, key=lambda c: c.key)  # the draw independent of the order the cases were built in
        drawn = random.Random(f"{seed}:{task}:{variant}").sample(group, min(reasked, len(group)))
        work += [(case, REASKED) for case in sorted(drawn, key=lambda c: c.key)]
    return work


class Runner:
    """Runs (case, strategy) jobs against the target with at most `concurrency` requests in flight."""

    def __init__(
        self,
        target: Target,
        cache: ResponseCache,
        concurrency: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.target = target
        self.cache = cache
        self.concurrency = concurrency
        self._transport = transport

    async def run(self, work: Sequence[tuple[Case, str]], progress: Progress | None = None) -> list[Sample]:
        """One sample record per job, in the order of `work`."""
        limit = asyncio.Semaphore(self.concurrency)
        headers = bearer(self.target.api_key)
        async with httpx.AsyncClient(
            base_url=self.target.base_url, headers=headers, timeout=self.target.timeout, transport=self._transport
        ) as client:

            async def one(job: int, case: Case, strategy: str) -> Sample:
                async with limit:
                    record = await self._answer(client, case, strategy)
                if progress is not None:
                    progress.advance(job, cached=record.cached, error=record.error is not None)
                return record

            return list(await asyncio.gather(*(one(i, c, s) for i, (c, s) in enumerate(work))))

    def key(self, case: Case, strategy: str) -> str:
        """The job's cache key."""
        return request_key(self.target.model, strategy, request_body(case, self.target.model))

    def ask(self, prompt: str, max_tokens: int = 256) -> str:
        """One plain (`none`) request, answered from the cache when it can be: SWiM's task generation."""
        case = Case("generation", "standard", 0, None, 0, prompt, ("",), "best_subspan_em", max_tokens)
        return asyncio.run(self.run([(case, "none")]))[0].answer

    async def _answer(self, client: httpx.AsyncClient, case: Case, strategy: str) -> Sample:
        body = request_body(case, self.target.model)
        key = request_key(self.target.model, strategy, body)
        reply = self.cache.get(key)
        cached = reply is not None
        if reply is None:
            reply = await self._send(client, body, strategy, key)
            reply = replace(
                reply,
                answer=self._redact(reply.answer),
                error=self._redact(reply.error) if reply.error else None,
                upstream=self.target.upstream,
                run=self.target.run,
            )
            if reply.final:
                self.cache.put(reply)
        return self._record(case, strategy, reply, cached)

    async def _send(self, client: httpx.AsyncClient, body: dict[str, Any], strategy: str, key: str) -> Answer:
        attempt = 0
        while True:
            started = time.perf_counter()
            # The A/A arm is `none` to the proxy; only its cache key and samples tell it apart.
            header = "none" if strategy == REASKED else strategy
            try:
                response = await client.post("/chat/completions", json=body, headers={STRATEGY_HEADER: header})
            except httpx.HTTPError as error:
                status, message = None, f"{type(error).__name__}: {error}"
            else:
                latency = time.perf_counter() - started
                if response.status_code == 200:
                    return self._completion(key, strategy, response, latency)
                status, message = response.status_code, _error_message(response)
                if response.status_code not in _RETRY_STATUSES:
                    return Answer(
                        key,
                        strategy,
                        True,
                        latency_s=latency,
                        upstream_calls=_calls(response),
                        status=status,
                        error=message,
                    )
            attempt += 1
            if attempt > self.target.retries:
                return Answer(key, strategy, False, status=status, error=message)
            await asyncio.sleep(self.target.backoff * 2 ** (attempt - 1))

    def _completion(self, key: str, strategy: str, response: httpx.Response, latency: float) -> Answer:
        try:
            payload = response.json()
            answer = payload["choices"][0]["message"].get("content") or ""
            usage = payload.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return Answer(
                key,
                strategy,
                True,
                latency_s=latency,
                upstream_calls=_calls(response),
                status=200,
                error="unreadable completion body",
            )
        return Answer(
            key,
            strategy,
            True,
            self._redact(answer),
            latency,
            {k: v for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens")},
            _calls(response),
            response.headers.get(STRATEGY_HEADER.lower()),
            200,
        )

    def _record(self, case: Case, strategy: str, reply: Answer, cached: bool) -> Sample:
        answer = self._redact(reply.answer)
        return Sample(
            task=case.task,
            variant=case.variant,
            size=case.size,
            position=case.position,
            sample=case.sample,
            strategy=strategy,
            case=case.key,
            prompt_hash=case.prompt_hash,
            metric=case.metric,
            gold=tuple(case.gold),
            answer=answer,
            score=0.0 if reply.error else score(case.metric, answer, case.gold),
            latency_s=reply.latency_s,
            prompt_tokens=reply.usage.get("prompt_tokens"),
            completion_tokens=reply.usage.get("completion_tokens"),
            upstream_calls=reply.upstream_calls,
            applied=reply.applied,
            status=reply.status,
            error=self._redact(reply.error) if reply.error else None,
            cached=cached,
            upstream=reply.upstream,
            run=reply.run,
        )

    def _redact(self, text: str) -> str:
        key = self.target.api_key
        return text.replace(key, "[redacted]") if key else text


def bearer(api_key: str | None) -> dict[str, str]:
    """The header that carries the client's key, if any."""
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


def _calls(response: httpx.Response) -> int | None:
    value = response.headers.get("x-context-upstream-calls")
    return int(value) if value and value.isdigit() else None


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        return f"{response.status_code} {error.get('code') or error.get('type')}: {error.get('message')}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"{response.status_code}: {response.text[:200]}"
