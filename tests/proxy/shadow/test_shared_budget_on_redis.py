"""The shadow budget in any 60 seconds, in one process and shared through a real Redis: replicas drawing at once take
no more than one budget between them, the window slides (no doubled budget across a minute's boundary), an overspend
stays as debt, a store that dies leaves each replica its own budget (said once, and in its status) and is used
again once it answers; the stream keeps what every replica wrote."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from contextlift.eval.sinks import read_sinks
from contextlift.proxy.shadow import store as store_module
from contextlift.proxy.shadow.budget import ShadowBudget
from contextlift.proxy.shadow.store import RETRY_SECONDS, ShadowStore
from tests.fakes import FakeUpstream, completion
from tests.proxy.shadow.test_shadow_evaluation import BODY
from tests.redis_server import RedisServer, redis_server


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as server:
        yield server


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def replica(url: str, calls: int, tokens: int = 10**6, **options: object) -> ShadowStore:
    return ShadowStore(url, "test", ShadowBudget(calls, tokens), max_records=1000, max_connections=4, **options)  # type: ignore[arg-type]


async def close(*replicas: ShadowStore) -> None:
    for each in replicas:
        await each.aclose()


def test_replicas_drawing_at_once_take_one_budget_between_them(redis: RedisServer) -> None:
    async def run() -> list[bool]:
        replicas = [replica(redis.url, 10) for _ in range(3)]
        taken = await asyncio.gather(*(replicas[i % 3].take(1, 1) for i in range(60)))
        await close(*replicas)
        return [each is not None for each in taken]

    taken = asyncio.run(run())
    # Each replica's own budget would have let 10 through: 30 in all.
    assert sum(taken) == 10


def test_a_correction_counts_from_its_reservation_and_leaves_the_window_with_it(redis: RedisServer) -> None:
    async def run() -> list[bool]:
        first, second = replica(redis.url, 100, 1000, window=1.0), replica(redis.url, 100, 1000, window=1.0)
        seen = []
        overspent = await first.take(1, 100)
        assert overspent is not None
        await first.correct(overspent, 1500)  # the sample spent 1,500 tokens where it reserved 100
        seen.append(await second.take(1, 1) is not None)  # the overspend is in the window
        await asyncio.sleep(1.2)
        underspent = await second.take(1, 1000)
        assert underspent is not None
        await second.correct(underspent, 200)  # it spent 200 of the 1,000 it reserved
        seen.append(await first.take(1, 800) is not None)
        seen.append(await first.take(1, 1) is not None)
        await asyncio.sleep(1.2)
        # Both reservations left with their corrections: no credit outlives them (a take past the limit stays out).
        seen.append(await first.take(1, 1001) is not None)
        seen.append(first.status()["state"] == second.status()["state"] == "shared")
        await close(first, second)
        return seen

    assert asyncio.run(run()) == [False, True, False, False, True]


def test_a_usage_count_past_any_real_one_neither_fills_nor_empties_the_window(redis: RedisServer) -> None:
    async def run() -> list[bool]:
        one = replica(redis.url, 100, 2 * 10**9, window=30.0)
        poisoned = await one.take(1, 1)
        assert poisoned is not None
        await one.correct(poisoned, 10**19)  # counted as MAX_TOKENS: the window is not full for good
        seen = [await one.take(1, 10**9 - 1) is not None, await one.take(1, 1) is not None]
        other = replica(redis.url, 100, 2 * 10**9, window=30.0)
        seen.append(other.status()["state"] == "shared")
        await close(one, other)
        return seen

    assert asyncio.run(run()) == [True, True, True]


def test_a_negative_usage_count_makes_no_room(redis: RedisServer) -> None:
    async def run() -> list[bool]:
        one = replica(redis.url, 100, 1000, window=30.0)
        taken = await one.take(1, 1000)
        assert taken is not None
        await one.correct(taken, -(10**9))
        seen = [await one.take(1, 1) is not None, await one.take(1, 1001) is not None]
        await close(one)
        return seen

    # Counted as 0 tokens: one more token fits, and nothing past the limit.
    assert asyncio.run(run()) == [True, False]


def test_the_shared_window_slides(redis: RedisServer) -> None:
    async def run() -> list[bool]:
        one = replica(redis.url, 3, window=2.0)
        taken = [await one.take(1, 1) is not None for _ in range(4)]
        await asyncio.sleep(1.0)
        taken.append(await one.take(1, 1) is not None)  # the first three are still in the window
        await asyncio.sleep(1.5)
        taken += [await one.take(1, 1) is not None for _ in range(4)]  # they left it; the fifth's refusal took nothing
        await close(one)
        return taken

    assert asyncio.run(run()) == [True, True, True, False, False, True, True, True, False]


def test_one_replica_never_spends_twice_its_budget_across_a_minute() -> None:
    clock = Clock(59.0)
    budget = ShadowBudget(10, 10**6, clock)
    assert all(budget.take_now(1, 1) for _ in range(10))
    clock.now = 61.0  # a new clock minute, the same 60 seconds
    assert not budget.take_now(1, 1)
    clock.now = 119.5
    assert budget.take_now(10, 1)


def test_a_store_that_dies_leaves_each_replica_its_own_budget_and_is_used_again(redis: RedisServer) -> None:
    clock = Clock(1000.0)

    async def run() -> None:
        one = replica(redis.url, 10, clock=clock)
        assert all([await one.take(1, 1) for _ in range(4)])
        redis.stop()
        with structlog.testing.capture_logs() as logs:
            started = time.monotonic()
            # This replica took 4 from the shared budget in the last 60 seconds: its own lets 6 more through.
            taken = [await one.take(1, 1) is not None for _ in range(8)]
            assert time.monotonic() - started < 2 * store_module.TIMEOUT_SECONDS
            assert taken == [True] * 6 + [False] * 2
            status = one.status()
            assert status["state"] == "fallback"
            assert status["error"] == "ConnectionError"
            assert "password" not in str(status)
            assert not await one.write({"kind": "x"})
            redis.start()  # a new, empty server on the same port
            assert not await one.take(1, 1)  # not asked before RETRY_SECONDS: still this replica's
            clock.now += RETRY_SECONDS
            assert await one.take(1, 1)
            assert one.status()["state"] == "shared"
        said = [(line["log_level"], line["event"]) for line in logs]
        assert said == [
            ("warning", "shadow budget falls back to this replica's"),
            ("warning", "shadow budget shared again"),
        ]
        await close(one)

    asyncio.run(run())


def test_a_store_url_is_logged_and_shown_without_its_password(tmp_path: Path) -> None:
    async def run() -> dict[str, object]:
        one = replica("redis://:s3cret-pass@127.0.0.1:1/2", 10)
        await one.check()
        status = one.status()
        await close(one)
        return status

    with structlog.testing.capture_logs() as logs:
        status = asyncio.run(run())
    assert status["store"] == "redis://127.0.0.1:1/2"
    assert "s3cret" not in str(logs) + str(status)


def test_every_replicas_records_and_latest_tallies_reach_the_reader(redis: RedisServer) -> None:
    record = {"candidates": [{"strategy": "reorder", "agrees": True, "exact": True, "calls": 1, "tokens": 9,
                              "seconds": 0.1}], "model": "m", "position_sensitive": False}  # fmt: skip

    def tally(run: str, sampled: int) -> dict[str, object]:
        return {"kind": "shadow-tally", "run": run, "sampled": sampled, "outcomes": {"evaluated": sampled}}

    async def run() -> None:
        replicas = [replica(redis.url, 10) for _ in range(3)]
        for i, each in enumerate(replicas):
            for _ in range(5):
                assert await each.write({**record, "model": f"m{i}"})
            assert await each.write(tally(f"run{i}", 4))
            assert await each.write(tally(f"run{i}", 5))  # cumulative: the later one counts
        await close(*replicas)

    asyncio.run(run())
    read = read_sinks([redis.url], prefix="test")
    assert sorted(r["model"] for r in read.records) == sorted(f"m{i}" for i in range(3) for _ in range(5))
    assert sorted((t["run"], t["sampled"]) for t in read.tallies) == [("run0", 5), ("run1", 5), ("run2", 5)]
    assert read.skipped == 0


def test_an_unreachable_store_is_a_one_line_error_for_the_reader() -> None:
    with pytest.raises(OSError, match=r"^redis://127.0.0.1:1/0: cannot read contextlift:shadow:records: "):
        read_sinks(["redis://:s3cret@127.0.0.1:1/0"])


def test_a_store_that_is_its_records_only_place_spends_nothing_while_it_cannot_be_reached(
    make_client: Any, fake: FakeUpstream
) -> None:
    fake.queue(*[httpx.Response(200, json=completion("T1"))] * 20)
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"],
                         shadow_store="redis://127.0.0.1:1/0")  # fmt: skip
    shadow = client.app.state["proxy"].shadow
    deadline = time.monotonic() + 5
    while shadow.store_status()["state"] != "fallback":  # its first ask, at start-up
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for _ in range(3):
        assert client.post("/v1/chat/completions", json=BODY).status_code == 200
    client.blocking_portal.call(shadow.join)
    assert len(fake.requests) == 3  # the client's calls, no shadow call
    assert shadow.tally.outcomes["sink-failed"] == 3
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["shadow_store"]["state"] == "fallback"
