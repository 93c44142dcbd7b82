"""The runner against a fake proxy (scripted answers and faults a real one cannot be made to show): what it
sends, what it retries, what it caches, how a run resumes, and that the key is never written."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.eval.cache import ResponseCache
from contextlift.eval.cases import Case, Sample
from contextlift.eval.runner import Runner, Target, jobs

CANARY = "sk-canary-5b1e0c9d"
CASE = Case(
    "litm-qa",
    "standard",
    10,
    4,
    0,
    "Document [1](Title: A) Paris.\n\nQuestion: capital?\nAnswer:",
    ("Paris",),
    "best_subspan_em",
    32,
)
BASELINE = Case(
    "litm-qa",
    "closed-book",
    10,
    None,
    0,
    "Question: capital?\nAnswer:",
    ("Paris",),
    "best_subspan_em",
    32,
    strategies=("none",),
)


class FakeProxy:
    """Answers with `script` in order (a status code or an answer text), then with "Paris"."""

    def __init__(self, *script: int | str) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.script.pop(0) if self.script else "Paris"
        if isinstance(step, int):
            return httpx.Response(step, json={"error": {"message": f"failed, key {CANARY}", "type": "x", "code": "y"}})
        content = step.replace("{key}", request.headers.get("authorization", ""))
        body = {
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43},
        }
        return httpx.Response(
            200, json=body, headers={"x-context-upstream-calls": "2", "x-context-strategy": "reorder"}
        )


def run(fake: FakeProxy, cache_path: Path, work: list[tuple[Case, str]], **target: Any) -> list[Sample]:
    with ResponseCache(cache_path) as cache:
        runner = Runner(
            Target("http://proxy/v1", "m", backoff=0, **target), cache, 2, httpx.MockTransport(fake.handler)
        )
        return asyncio.run(runner.run(work))


def test_each_strategy_is_sent_as_a_client_would_and_scored(tmp_path: Path) -> None:
    fake = FakeProxy("Paris", "Lyon")
    work = jobs([CASE, BASELINE], ["none", "reorder"])
    assert [(c.variant, s) for c, s in work] == [("standard", "none"), ("standard", "reorder"), ("closed-book", "none")]
    records = run(fake, tmp_path / "cache.jsonl", work, api_key=CANARY)
    sent = fake.requests[0]
    assert sent.url == "http://proxy/v1/chat/completions"
    assert sent.headers["x-context-strategy"] == "none"
    assert sent.headers["authorization"] == f"Bearer {CANARY}"
    assert json.loads(sent.content) == {
        "model": "m",
        "messages": [{"role": "user", "content": CASE.prompt}],
        "max_tokens": 32,
        "temperature": 0.0,
    }
    assert [r.score for r in records] == [1.0, 0.0, 1.0]
    assert records[0].to_json() | {"latency_s": None} == records[0].to_json() | {
        "upstream_calls": 2,
        "prompt_tokens": 40,
        "completion_tokens": 3,
        "position": 4,
        "case": CASE.key,
        "strategy": "none",
        "error": None,
        "cached": False,
        "latency_s": None,
    }


def test_a_rerun_is_answered_from_the_cache_and_only_rescored(tmp_path: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    run(FakeProxy(), cache, jobs([CASE], ["none", "reorder"]))
    again = FakeProxy()
    records = run(again, cache, jobs([CASE], ["none", "reorder"]))
    assert again.requests == []
    assert all(r.cached and r.score == 1.0 for r in records)


def test_a_cache_line_holds_the_answer_fields_in_order_and_a_failure_reports_no_strategy(tmp_path: Path) -> None:
    """The lines earlier runs wrote, field for field: a cache from before is read as it always was."""
    cache = tmp_path / "cache.jsonl"
    run(FakeProxy("Paris", 400), cache, jobs([CASE], ["none", "reorder"]))
    answered, refused = sorted((json.loads(line) for line in cache.read_text().splitlines()), key=lambda e: e["status"])
    common = ["key", "strategy", "final", "answer", "latency_s", "usage", "upstream_calls"]
    assert list(answered) == [*common, "applied", "status", "error", "upstream", "run"]
    assert answered["usage"] == {"prompt_tokens": 40, "completion_tokens": 3}
    assert (answered["applied"], answered["upstream_calls"], answered["final"]) == ("reorder", 2, True)
    assert list(refused) == [*common, "status", "error", "upstream", "run"]
    assert (refused["answer"], refused["usage"], refused["status"]) == ("", {}, 400)


def test_an_interrupted_run_resumes_past_a_torn_last_line(tmp_path: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    run(FakeProxy(), cache, jobs([CASE], ["none"]))
    cache.write_text(cache.read_text() + '{"key": "torn')
    resumed = FakeProxy()
    records = run(resumed, cache, jobs([CASE], ["none", "reorder"]))
    assert len(resumed.requests) == 1  # only reorder was missing
    assert [r.cached for r in records] == [True, False]
    assert len(ResponseCache(cache)) == 2


def test_server_errors_are_retried_and_a_final_failure_is_not_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    fake = FakeProxy(503, 429, "Paris")
    records = run(fake, cache, jobs([CASE], ["none"]), retries=3)
    assert len(fake.requests) == 3
    assert records[0].score == 1.0
    failing = FakeProxy(503, 503)
    records = run(failing, tmp_path / "other.jsonl", jobs([CASE], ["none"]), retries=1)
    assert records[0].status == 503
    assert records[0].score == 0.0
    assert not (tmp_path / "other.jsonl").exists()  # retried on the next run, not remembered as an answer


def test_a_client_error_is_final_cached_and_scored_zero(tmp_path: Path) -> None:
    fake = FakeProxy(400)
    records = run(fake, tmp_path / "cache.jsonl", jobs([CASE], ["none"]), retries=3)
    assert len(fake.requests) == 1
    assert records[0].status == 400
    assert records[0].score == 0.0
    assert records[0].error.startswith("400 y: failed")


def test_the_key_never_reaches_records_or_cache_even_when_echoed(tmp_path: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    records = run(FakeProxy("Paris {key}", 400), cache, jobs([CASE], ["none", "reorder"]), api_key=CANARY)
    assert CANARY not in json.dumps([r.to_json() for r in records])
    assert CANARY not in cache.read_text()
    assert "[redacted]" in records[0].answer


def test_a_proxy_that_is_down_becomes_an_error_record(tmp_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with ResponseCache(tmp_path / "cache.jsonl") as cache:
        runner = Runner(Target("http://proxy/v1", "m", retries=1, backoff=0), cache, 1, httpx.MockTransport(refuse))
        records = asyncio.run(runner.run(jobs([CASE], ["none"])))
    assert records[0].error == "ConnectError: refused"
    assert records[0].status is None


@pytest.mark.parametrize("concurrency", [1, 3])
def test_answers_come_back_in_the_order_of_the_work(tmp_path: Path, concurrency: int) -> None:
    cases = [Case("t", "v", 1, p, 0, f"prompt {p}", (str(p),), "substring") for p in range(6)]

    async def echo(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][0]["content"]
        await asyncio.sleep(0.01 * (6 - int(prompt.split()[-1])))
        return httpx.Response(200, json={"choices": [{"message": {"content": prompt}}]})

    with ResponseCache(tmp_path / "cache.jsonl") as cache:
        runner = Runner(Target("http://proxy/v1", "m"), cache, concurrency, httpx.MockTransport(echo))
        records = asyncio.run(runner.run(jobs(cases, ["none"])))
    assert [r.position for r in records] == list(range(6))
    assert all(r.score == 1.0 for r in records)
