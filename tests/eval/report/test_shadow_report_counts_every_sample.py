"""Samples never vanish silently: what shadow evaluation drew and what became of each sample (evaluated, or lost
and why) is in the sink's tally, which `contextlift shadow-report` leads with, and in a log line at the first loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog.testing

from contextlift.proxy.cli import main
from tests.fakes import FakeUpstream, chunk, sse_body
from tests.proxy.shadow.test_shadow_evaluation import BODY, hangs, metric, settle, shadow_of


def test_samples_dropped_for_the_budget_are_counted_with_why_in_the_report_and_the_log(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = tmp_path / "shadow.jsonl"
    # One candidate and the served pipeline in three orders: 4 calls a sample, so 2 samples fit 10 calls a minute.
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"],
                         shadow_calls_per_minute=10, shadow_sink=str(sink))  # fmt: skip
    with structlog.testing.capture_logs() as logs:
        for _ in range(14):
            assert client.post("/v1/chat/completions", json=BODY).status_code == 200
            settle(client)
        client.blocking_portal.call(shadow_of(client).write_tally)
    evaluated = int(metric(client, "contextlift_shadow_samples_total", outcome="evaluated"))
    dropped = int(metric(client, "contextlift_shadow_samples_total", outcome="dropped-budget"))
    assert evaluated + dropped == 14
    assert dropped >= 8  # a minute boundary crossed mid-test lets two more through
    lost = [e for e in logs if e["event"] == "shadow sample lost"]
    assert [e["outcome"] for e in lost] == ["dropped-budget"]  # said once, at the first loss
    assert "plans up to 4 upstream calls against shadow_calls_per_minute 10, so 2 fit a minute" in lost[0]["why"]

    capsys.readouterr()  # the proxy's own log lines
    assert main(["shadow-report", str(sink), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"14 sampled, {evaluated} evaluated; not evaluated: {dropped} dropped-budget\n")
    report = (tmp_path / "report" / "report.md").read_text()
    assert f"**14 sampled, {evaluated} evaluated, {dropped} not evaluated**; {evaluated} records" in report
    assert f"| dropped-budget | {dropped} | over the shadow budget: a sample plans up to 4 upstream calls" in report


def test_a_sink_with_every_sample_dropped_still_reports_why(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = tmp_path / "shadow.jsonl"
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"],
                         shadow_calls_per_minute=3, shadow_sink=str(sink))  # fmt: skip
    for _ in range(3):
        client.post("/v1/chat/completions", json=BODY)
        settle(client)
    client.blocking_portal.call(shadow_of(client).write_tally)
    capsys.readouterr()  # the proxy's own log lines
    assert main(["shadow-report", str(sink), "--out", str(tmp_path / "report")]) == 0
    assert capsys.readouterr().out.startswith("3 sampled, 0 evaluated; not evaluated: 3 dropped-budget\n")


def test_each_process_is_counted_once_from_its_latest_tally(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def tally(run: str, sampled: int, evaluated: int) -> str:
        outcomes = {"evaluated": evaluated, "dropped-queue": sampled - evaluated}
        line = {"kind": "shadow-tally", "run": run, "time": "2026-11-27T10:00:00+00:00", "sampled": sampled,
                "outcomes": outcomes, "planned_calls": 4, "limits": {"calls_per_minute": 60, "queue": 32}}  # fmt: skip
        return json.dumps(line, separators=(",", ":"))

    (tmp_path / "a.jsonl").write_text("\n".join([tally("a", 3, 1), tally("a", 5, 2)]) + "\n")
    (tmp_path / "b.jsonl").write_text(tally("b", 4, 4) + "\n")
    assert main(["shadow-report", str(tmp_path), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("9 sampled, 6 evaluated; not evaluated: 3 dropped-queue\n")
    assert "dropped-queue: the queue of samples waiting was full (shadow_queue 32)" in out


def _served_streams_shadow_hangs(request: httpx.Request) -> Any:
    """The client's requests stream and are answered; a shadow call (never streamed) hangs until shutdown."""
    if json.loads(request.content).get("stream"):
        events = [chunk("T1"), chunk(finish="stop")]
        return httpx.Response(200, content=sse_body(events), headers={"content-type": "text/event-stream"})
    return hangs(request)


def test_samples_unfinished_at_shutdown_are_counted_abandoned_with_why_none_left_pending(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sink = tmp_path / "shadow.jsonl"
    fake.queue(*[_served_streams_shadow_hangs] * 10)
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_max_in_flight=1, upstream_timeout=60,
                         shadow_sink=str(sink))  # fmt: skip
    for _ in range(3):
        assert client.post("/v1/chat/completions", json={**BODY, "stream": True}).status_code == 200
    assert metric(client, "contextlift_shadow_pending") == 3  # one hanging in the worker, two waiting
    client.__exit__(None, None, None)  # shutdown: the work is cancelled, not waited for

    tally = [json.loads(line) for line in sink.read_text().splitlines() if '"kind":"shadow-tally"' in line][-1]
    assert (tally["sampled"], tally["outcomes"]) == (3, {"abandoned": 3})
    capsys.readouterr()  # the proxy's own log lines
    assert main(["shadow-report", str(sink), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("3 sampled, 0 evaluated; not evaluated: 3 abandoned\n")
    assert "abandoned: the proxy shut down before it was evaluated" in out
    assert "pending" not in out


def test_a_sample_the_proxy_keeps_nothing_of_is_counted_not_left_pending(make_client: Any, tmp_path: Path) -> None:
    sink = tmp_path / "shadow.jsonl"
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_sink=str(sink))
    assert client.post("/v1/chat/completions", json={**BODY, "n": 2}).status_code == 200
    client.blocking_portal.call(shadow_of(client).write_tally)
    tally = [json.loads(line) for line in sink.read_text().splitlines() if '"kind":"shadow-tally"' in line][-1]
    assert (tally["sampled"], tally["outcomes"]) == (1, {"not-kept": 1})
