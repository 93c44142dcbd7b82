"""The shared store when things go wrong: a password with the URL's own characters is never repeated (settings, logs,
the report's command), a full Redis gets room back from the stream's oldest records instead of refusing every record
for good (said once, the budget still shared), and a stream written by someone else costs its reader a page's bytes:
an entry past the bound is skipped and counted, and the server's own words never reach the terminal."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_client
import structlog

from contextlift.eval import sinks
from contextlift.proxy.cli import main
from contextlift.proxy.settings import Settings
from contextlift.proxy.shadow.budget import ShadowBudget
from contextlift.proxy.shadow.store import ShadowStore, where
from tests.redis_server import RedisServer, redis_server

SLASHED = "S3cr/et+pw"
"""An Azure-style key: base64 holds '/'."""


@pytest.mark.parametrize(
    "url", [f"redis://:{SLASHED}@cache:6380/1", "redis://:pw?x#y@cache/0", "redis://:pw@cache:port/0"]
)
def test_a_url_that_cannot_be_read_is_refused_without_repeating_it(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTLIFT_SHADOW_STORE", url)
    assert main(["serve", "--upstream", "http://up/v1"]) == 2
    with pytest.raises(SystemExit):
        main(["shadow-report", url, "--out", "report"])
    said = capsys.readouterr().err
    assert said.count("must be percent-encoded") == 2
    for secret in ("S3cr", "pw?", "pw@"):
        assert secret not in said
    assert where(url) == "(a store URL that cannot be read)"


def test_a_percent_encoded_password_is_read(tmp_path: Path) -> None:
    url = "redis://:S3cr%2Fet%2Bpw@cache:6380/1"
    assert Settings(upstream_url="http://up/v1", shadow_store=url).shadow_store is not None
    assert where(url) == "redis://cache:6380/1"


@pytest.fixture
def full(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path, options=("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")) as server:
        yield server


def test_a_full_redis_gives_the_stream_room_back_and_keeps_the_budget_shared(full: RedisServer) -> None:
    record = {"candidates": [], "model": "m", "padding": "x" * 100_000}

    async def run() -> tuple[int, int, list[bool], str]:
        store = ShadowStore(full.url, "t", ShadowBudget(100, 10**6), max_records=10_000, max_connections=4)
        written = [await store.write(record) for _ in range(200)]
        refused = written.index(False)
        later = [await store.write(record) for _ in range(5)]
        state = store.status()["state"]
        taken = await store.take(1, 1)
        await store.aclose()
        return refused, sum(written), later, state if taken is not None else "no budget"

    with structlog.testing.capture_logs() as logs:
        refused, written, later, state = asyncio.run(run())
    assert 10 < refused < 100  # 4 MB hold a few dozen records of 100 KB
    assert written > refused  # the trims made room: writing went on after the first refusal
    assert any(later)
    assert state == "shared"  # a refusal is not a store gone: no fall back, no flapping
    events = [line["event"] for line in logs]
    assert events.count("shadow store refused a record") == 1
    assert "shadow budget falls back to this replica's" not in events


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path) as server:
        yield server


def test_a_reader_skips_an_entry_past_its_bound_and_counts_it(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = redis_client.Redis.from_url(redis.url)
    good = b'{"candidates":[],"model":"m"}'
    for value in (good, b"x" * 5000, good, b"\xff\xfe not utf-8", good):
        client.xadd("contextlift:shadow:records", {"r": value})
    client.xadd("contextlift:shadow:records", {"other": "field"})
    client.close()
    monkeypatch.setattr(sinks, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(sinks, "STORE_PAGE", 2)
    read = sinks.read_sinks([redis.url], whole=False)
    assert len(read.records) == 3
    assert read.skipped == 3


def test_the_servers_own_words_never_reach_the_terminal(redis: RedisServer, capsys: pytest.CaptureFixture[str]) -> None:
    client = redis_client.Redis.from_url(redis.url)
    client.set("contextlift:shadow:records", "\x1b]0;owned\x07 a string, not a stream")
    client.close()
    assert main(["shadow-report", redis.url, "--out", "report"]) == 2
    said = capsys.readouterr().err
    assert said.strip().endswith("cannot read contextlift:shadow:records: ResponseError")
    assert "\x1b" not in said
