"""`contextlift eval` as a user runs it, with the proxy started in-process in front of a fake upstream over a
real socket (the fake echoes the caller's key back, which no real model can be made to do), and
`contextlift eval-merge` joining shards into the report an unsharded run writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy.cli import main
from tests.fakes import completion
from tests.serving import fake_upstream_url, request_body

CANARY = "sk-canary-7f3a9e21d4"


async def echoing_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A fake upstream: lists one model; answers chat with the caller's Authorization in the text, except the
    multi-fact prompts, which it refuses with that Authorization in the error message."""
    if scope["type"] != "http":
        return
    body = await request_body(receive)
    auth = dict(scope["headers"]).get(b"authorization", b"").decode()
    if scope["path"].endswith("/models"):
        status, payload = 200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
    elif b"magic numbers" in body:
        status, payload = 400, {"error": {"message": f"bad request from {auth}", "type": "invalid_request_error"}}
    else:
        status, payload = 200, completion(f"The answer, {auth}")
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with fake_upstream_url(echoing_upstream) as url:
        yield url


def evaluate(upstream_url: str, out: Path, *extra: str) -> int:
    return main(
        [
            "eval",
            "--upstream",
            upstream_url,
            "--api-key",
            CANARY,
            "--tasks",
            "litm-qa,multifact",
            "--sizes",
            "litm-qa=10",
            "--sizes",
            "multifact=300",
            "--samples",
            "2",
            "--retries",
            "0",
            "--strategies",
            "none",
            "--strategies",
            "reorder",
            "--out",
            str(out),
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def full_run(upstream_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "report"
    assert evaluate(upstream_url, out) == 0
    return out


def test_the_run_writes_every_report_file(full_run: Path) -> None:
    names = {p.name for p in full_run.iterdir()}
    assert {"samples.jsonl", "results.json", "report.md", "report.html", "run.json", "responses.jsonl"} <= names
    samples = [json.loads(line) for line in (full_run / "samples.jsonl").read_text().splitlines()]
    assert {s["task"] for s in samples} == {"litm-qa", "multifact"}
    assert {s["strategy"] for s in samples} == {"none", "reorder", "none (re-asked)"}
    assert all(s["status"] == 400 and s["score"] == 0 for s in samples if s["task"] == "multifact")
    # reorder acts, or says why not (its ranker's margin under the gate): never another step.
    applied = [s["applied"] for s in samples if s["strategy"] == "reorder" and s["task"] == "litm-qa"]
    assert all(a == "reorder" or a.startswith("reorder; skipped=margin; margin=") for a in applied)
    run = json.loads((full_run / "run.json").read_text())
    assert run["model"] == "fake-model"
    # The task descriptions keep their JSON types: multifact's positions are depths, not gold indices.
    assert run["tasks"]["litm-qa"]["positional"] is True
    assert run["tasks"]["multifact"]["positional"] is False


def test_the_prompt_shape_is_recorded_in_run_json_and_the_report(upstream_url: str, tmp_path: Path) -> None:
    out = tmp_path / "shaped"
    assert evaluate(upstream_url, out, "--tasks", "litm-qa", "--samples", "1", "--option", "litm-qa.prompt=dspy") == 0
    run = json.loads((out / "run.json").read_text())
    assert run["tasks"]["litm-qa"]["prompt"] == "dspy"
    report = (out / "report.md").read_text()
    assert "## litm-qa: Multi-document QA (Lost in the Middle)\n\nprompt shape: `dspy`\n" in report
    assert all(s["status"] == 200 for s in map(json.loads, (out / "samples.jsonl").read_text().splitlines()))


def test_the_key_appears_in_no_output_file(full_run: Path) -> None:
    for path in full_run.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path.name
    samples = (full_run / "samples.jsonl").read_text()
    assert "[redacted]" in samples  # the echo was there, and was blanked


def test_shards_merge_into_the_unsharded_report(upstream_url: str, full_run: Path, tmp_path: Path) -> None:
    for index in range(2):
        assert (
            evaluate(
                upstream_url,
                tmp_path / f"part{index}",
                "--shard",
                f"{index}/2",
                "--cache",
                str(full_run / "responses.jsonl"),
            )
            == 0
        )
        assert not (tmp_path / f"part{index}" / "report.md").exists()
    assert (
        main(["eval-merge", str(tmp_path / "part0"), str(tmp_path / "part1"), "--out", str(tmp_path / "merged")]) == 0
    )
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    whole = json.loads((full_run / "results.json").read_text())
    assert merged["accuracy"] == whole["accuracy"]
    assert merged["lift"] == whole["lift"]


def test_bad_arguments_exit_2_with_the_reason(
    upstream_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert evaluate(upstream_url, tmp_path / "x", "--shard", "3/2") == 2
    assert "--shard '3/2'" in capsys.readouterr().err
    assert main(["eval-merge", str(tmp_path / "missing"), "--out", str(tmp_path / "m")]) == 2
    assert "cannot read the parts" in capsys.readouterr().err


def test_without_the_eval_extra_a_report_run_stops_before_any_request(
    upstream_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlift.eval.cli

    monkeypatch.setattr(contextlift.eval.cli, "_can_plot", lambda: False)
    assert evaluate(upstream_url, tmp_path / "x") == 2
    assert "pip install 'contextlift[eval]'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["eval-merge", str(tmp_path / "x"), "--out", str(tmp_path / "m")]) == 2
    assert "contextlift[eval]" in capsys.readouterr().err
