"""`contextlift shadow-report` on a sink the proxy really wrote: the share of position-sensitive requests and each
candidate's agreement, counted by hand from what the scripted upstream answered."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.eval.report.shadow import summarise
from contextlift.proxy.cli import main
from tests.fakes import FakeUpstream, completion

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is about topic {i}" for i in range(1, 6))


def body(question: str) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: {question}\nAnswer:"}],
    }


def upstream(request: httpx.Request) -> httpx.Response:
    """Order-dependent on questions that say so (the first document's title), order-blind otherwise."""
    prompt = json.loads(request.content)["messages"][-1]["content"]
    titles = re.findall(r"Title: (T\d)", prompt)
    return httpx.Response(200, json=completion(titles[0] if "first" in prompt.split("Question:")[-1] else "T3"))


@pytest.fixture
def sink(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> Path:
    fake.queue(*[upstream] * 100)
    path = tmp_path / "shadow.jsonl"
    client = make_client(
        shadow_rate=1.0,
        shadow_use_client_key=True,
        shadow_strategies=["reorder; order=descending"],
        shadow_sink=str(path),
    )
    for question in ("which comes first?", "which is first?", "which is third?", "what topic is it?"):
        assert client.post("/v1/chat/completions", json=body(question)).status_code == 200
        client.blocking_portal.call(client.app.state["proxy"].shadow.join)
    client.blocking_portal.call(client.app.state["proxy"].shadow.write_tally)
    return path


def test_the_report_counts_what_the_upstream_did(
    sink: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()  # the proxy's own log lines
    assert main(["shadow-report", str(sink), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 sampled, 4 evaluated\n")
    assert "4 evaluated requests; position-sensitive 0.500" in out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "| position-sensitive | 0.500 |" in report
    assert "`reorder; order=descending`" in report
    assert (tmp_path / "report" / "report.html").read_text().startswith("<!doctype html>")
    records = [record for line in sink.read_text().splitlines() if "kind" not in (record := json.loads(line))]
    summary = summarise(records)
    # Every shadow call is one call, as the served one was: the cost ratio is exactly 1.
    assert summary["candidates"]["reorder; order=descending"]["calls_ratio"].value == 1.0
    assert summary["candidates"]["reorder; order=descending"]["agrees"].n == 4


def test_an_empty_sink_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["shadow-report", str(tmp_path / "empty.jsonl"), "--out", str(tmp_path / "r")]) == 2
    assert "no shadow records" in capsys.readouterr().err


def test_malformed_lines_are_skipped_and_counted_never_a_traceback(
    sink: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.loads(sink.read_text().split("\n")[0])
    older = json.dumps({**good, "model": "m\u2028x\u2029y\x85z"}, ensure_ascii=False)  # as sinks were once written
    with sink.open("ab") as file:
        file.write(older.encode() + b"\n")
        file.write(b'{"candidates":[1]}\n')
        file.write(json.dumps({**good, "candidates": [{"strategy": "reorder"}]}).encode() + b"\n")
        file.write(b'{"candidates":[],"model":"\xe2\x80"}\n')  # a torn UTF-8 character
        file.write(b"[1, 2]\n")
    assert main(["shadow-report", str(sink), "--out", str(tmp_path / "report")]) == 0
    assert "5 evaluated requests; position-sensitive" in capsys.readouterr().out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "4 malformed lines skipped" in report
