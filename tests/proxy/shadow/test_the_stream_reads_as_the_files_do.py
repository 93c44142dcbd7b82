"""Records on a shared store's stream read as the file sink's do: a proxy writing to both gives one report and one
policy from either (the same probe groups, the same rule), `contextlift policy` reads the stream itself, and nothing
the report or the policy writes names the store's password."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy.cli import main
from tests.fakes import FakeUpstream
from tests.proxy.shadow.test_shadow_probes import lost_in_the_middle, run_traffic
from tests.redis_server import RedisServer, redis_server

PASSWORD = "s3cret-redis-pass"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path / "redis", PASSWORD) as server:
        yield server


def test_the_stream_gives_the_files_report_and_policy(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, redis: RedisServer
) -> None:
    sink = tmp_path / "shadow.jsonl"
    store = redis.url
    run_traffic(make_client, fake, lost_in_the_middle, sink, requests=45, shadow_store=store)
    from_file, from_store = tmp_path / "file-report", tmp_path / "store-report"
    assert main(["shadow-report", str(sink), "--out", str(from_file)]) == 0
    assert main(["shadow-report", store, "--out", str(from_store)]) == 0
    file_probes = json.loads((from_file / "probes.json").read_text())
    store_probes = json.loads((from_store / "probes.json").read_text())
    assert store_probes["sinks"] == [redis.address]
    assert store_probes["groups"] == file_probes["groups"]
    assert file_probes["groups"][0]["probes"] == 45

    policies = {}
    for name, source in (("file", str(from_file)), ("store", store)):
        out = tmp_path / f"{name}.toml"
        assert main(["policy", source, "--out", str(out), "--keep", "none"]) == 0
        policies[name] = tomllib.loads(out.read_text())["rule"]
    [from_reports], [from_stream] = policies["file"], policies["store"]
    assert from_stream["strategy"] == from_reports["strategy"] == "reorder"
    assert from_stream["evidence"]["id"] == f"{redis.address}#probes/fake-model/litm/literal+one-hop/reorder"
    assert {k: v for k, v in from_stream["evidence"].items() if k not in ("id", "report")} == {
        k: v for k, v in from_reports["evidence"].items() if k not in ("id", "report")
    }
    written = "".join(path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file())
    assert PASSWORD not in written
