"""Three `contextlift serve` processes and one real Redis, shadow on every request with a budget of 30 calls a
minute: under 300 requests the upstream receives no more than 30 shadow calls, and `contextlift shadow-report` over
the stream counts every sample of the three. With Redis killed halfway, every client request is still answered,
each replica says it fell back (its log and `/readyz`), and spends its own budget from then on."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.proxy.cli import main
from contextlift.proxy.local_model import free_port
from tests.fakes import completion
from tests.proxy.shadow.test_shadow_evaluation import BODY
from tests.redis_server import RedisServer, redis_server
from tests.serving import fake_upstream_url, request_body

REPLICAS = 3
REQUESTS = 300
BUDGET = 30
CALLS_PER_SAMPLE = 4
"""`reorder` as the candidate, then the served pipeline again (the control) and on two other orders."""


class CountingUpstream:
    """A fake upstream answering every chat call, counting them: the client's 300, the rest shadow calls."""

    def __init__(self) -> None:
        self.chat_calls = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await request_body(receive)
        if scope["path"].endswith("/chat/completions"):
            self.chat_calls += 1
            payload = json.dumps(completion("T1")).encode()
        else:
            payload = b'{"object": "list", "data": []}'
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as server:
        yield server


def start_replicas(
    upstream: str, store: str, tmp_path: Path, *, sinks: bool = False
) -> list[tuple[subprocess.Popen[bytes], str, Path]]:
    """REPLICAS serve processes sharing `store`, each with a file sink of its own where `sinks`."""
    env = {
        **os.environ,
        "CONTEXTLIFT_UPSTREAM_API_KEY": "sk-operator",
        "CONTEXTLIFT_SHADOW_RATE": "1",
        "CONTEXTLIFT_SHADOW_STRATEGIES": '["reorder"]',
        "CONTEXTLIFT_SHADOW_CALLS_PER_MINUTE": str(BUDGET),
        "CONTEXTLIFT_SHADOW_QUEUE": "1000",
        "CONTEXTLIFT_SHADOW_MAX_IN_FLIGHT": "4",
        "CONTEXTLIFT_SHADOW_STORE": store,
        "CONTEXTLIFT_LOG_FORMAT": "json",
        "HF_HUB_OFFLINE": "1",
    }
    replicas = []
    for i in range(REPLICAS):
        port, log = free_port(), tmp_path / f"replica-{i}.log"
        sink = {"CONTEXTLIFT_SHADOW_SINK": str(tmp_path / "sinks" / f"replica-{i}.jsonl")} if sinks else {}
        command = [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--upstream", upstream]
        with log.open("wb") as out:
            process = subprocess.Popen([*command, "--port", str(port)], env={**env, **sink}, stdout=out, stderr=out)
        replicas.append((process, f"http://127.0.0.1:{port}", log))
    for process, url, log in replicas:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
    return replicas


def metric(url: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def send(urls: list[str], count: int) -> list[int]:
    """`count` chat requests with documents, spread over the replicas, twenty at a time; their statuses."""

    async def run() -> list[int]:
        limit = asyncio.Semaphore(20)
        async with httpx.AsyncClient(timeout=30) as client:

            async def one(i: int) -> int:
                async with limit:
                    response = await client.post(f"{urls[i % len(urls)]}/v1/chat/completions", json=BODY)
                    return response.status_code

            return list(await asyncio.gather(*(one(i) for i in range(count))))

    return asyncio.run(run())


def settle(urls: list[str], sampled: int) -> None:
    """Wait until every replica's samples are all accounted for (evaluated or dropped)."""
    deadline = time.monotonic() + 60
    while True:
        counted = sum(metric(url, "contextlift_shadow_samples_total") for url in urls)
        pending = sum(metric(url, "contextlift_shadow_pending") for url in urls)
        if counted >= sampled and pending == 0:
            return
        assert time.monotonic() < deadline, f"{counted} of {sampled} samples accounted for, {pending} pending"
        time.sleep(0.2)


def stop(replicas: list[tuple[subprocess.Popen[bytes], str, Path]]) -> None:
    for process, _, _ in replicas:
        process.send_signal(signal.SIGTERM)
    for process, _, _ in replicas:
        process.wait(30)


def test_three_replicas_spend_one_budget_and_the_report_counts_every_sample(
    redis: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = CountingUpstream()
    with fake_upstream_url(upstream) as upstream_url:
        replicas = start_replicas(upstream_url, redis.url, tmp_path)
        urls = [url for _, url, _ in replicas]
        try:
            started = time.monotonic()
            assert send(urls, REQUESTS) == [200] * REQUESTS
            settle(urls, REQUESTS)
            assert time.monotonic() - started < 60, "the run outlasted the budget's window"
            shadow_calls = upstream.chat_calls - REQUESTS
            evaluated = int(sum(metric(url, "contextlift_shadow_samples_total", outcome="evaluated") for url in urls))
        finally:
            stop(replicas)
    # Each replica alone would have spent 28 (seven samples of four calls): 84 in all.
    assert shadow_calls <= BUDGET
    assert evaluated == BUDGET // CALLS_PER_SAMPLE
    assert shadow_calls == evaluated * CALLS_PER_SAMPLE

    assert main(["shadow-report", redis.url, "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    dropped = REQUESTS - evaluated
    assert printed.startswith(f"{REQUESTS} sampled, {evaluated} evaluated; not evaluated: {dropped} dropped-budget\n")
    assert f"{evaluated} evaluated requests;" in printed


def test_a_redis_that_dies_halfway_leaves_every_request_answered_and_each_replica_on_its_own_budget(
    redis: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upstream = CountingUpstream()
    half = REQUESTS // 2
    with fake_upstream_url(upstream) as upstream_url:
        replicas = start_replicas(upstream_url, redis.url, tmp_path, sinks=True)
        urls = [url for _, url, _ in replicas]
        try:
            assert send(urls, half) == [200] * half
            settle(urls, half)
            shared_calls = upstream.chat_calls - half
            redis.stop()
            assert send(urls, half) == [200] * half
            settle(urls, REQUESTS)
            fallback_calls = upstream.chat_calls - REQUESTS - shared_calls
            statuses = [httpx.get(f"{url}/readyz").json() for url in urls]
        finally:
            stop(replicas)
    assert shared_calls <= BUDGET
    # Each replica's own budget counts what it took from the shared one in the same 60 seconds: together they spend
    # at most one budget each, the shared share included.
    assert 0 < fallback_calls <= REPLICAS * BUDGET - shared_calls
    assert all(status["status"] == "ready" and status["shadow_store"]["state"] == "fallback" for status in statuses)
    for _, _, log in replicas:
        events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]
        assert events.count("shadow budget falls back to this replica's") == 1
    # The file sinks kept every record, before and after: the report over them counts every sample.
    assert main(["shadow-report", str(tmp_path / "sinks"), "--out", str(tmp_path / "report")]) == 0
    evaluated = (shared_calls + fallback_calls) // CALLS_PER_SAMPLE
    assert capsys.readouterr().out.startswith(f"{REQUESTS} sampled, {evaluated} evaluated; not evaluated: ")
