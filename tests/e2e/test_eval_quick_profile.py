"""`contextlift eval --profile quick` against the real local model, as the README runs it: every report file
is written, every accuracy in report.md is the mean of its cases in samples.jsonl, and the policy it writes
(`--write-policy`) is loaded by a proxy whose `auto` applies what the report recommended."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

TABLE = re.compile(r"^### (?P<variant>.+), (?P<size>\d+) (?P<unit>.+)$")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quick") / "report"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("CONTEXTLIFT_UPSTREAM_URL", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "contextlift.proxy.cli",
            "eval",
            "--profile",
            "quick",
            # The quick profile's own pipelines minus six (filter then reorder, chain, focus, excerpt, repeat, pick):
            # here they would add 78 requests to a test of the report, not of the strategies (which
            # tests/e2e/test_strategies_on_local_model.py runs on the local model).
            *("--strategies", "none", "--strategies", "reorder", "--strategies", "query-aware"),
            *("--strategies", "recite", "--strategies", "fact", "--strategies", "medoid; k=3"),
            "--out",
            str(out),
            "--write-policy",
            str(out / "policy.toml"),
            # What this report alone writes: without the built-in rules a written policy keeps by default.
            "--keep",
            "none",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "report:" in done.stdout
    return out


def test_every_report_file_is_written(report: Path) -> None:
    for name in ("samples.jsonl", "results.json", "report.md", "report.html", "run.json"):
        assert (report / name).stat().st_size > 0, name
    plots = list((report / "plots").glob("*.png"))
    assert any(p.name.endswith("-position.png") for p in plots)
    assert any(p.name.endswith("-heatmap.png") for p in plots)
    samples = [json.loads(line) for line in (report / "samples.jsonl").read_text().splitlines()]
    assert {s["task"] for s in samples} == {"litm-qa", "litm-kv", "swim", "length", "multifact"}
    assert {s["strategy"] for s in samples} >= {"none", "reorder", "query-aware", "recite", "fact", "medoid; k=3"}
    assert sum(1 for s in samples if s["error"]) == 0
    assert all(s["upstream_calls"] == 3 for s in samples if s["strategy"] == "medoid; k=3")


def test_report_md_agrees_with_samples_jsonl(report: Path) -> None:
    scores: dict[tuple[str, str, int, str, str], list[float]] = defaultdict(list)
    for line in (report / "samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        position = "all" if s["position"] is None else str(s["position"])
        scores[(s["task"], s["variant"], s["size"], s["strategy"], position)].append(s["score"])
    checked = 0
    task = variant = size = None
    positions: list[str] = []
    for line in (report / "report.md").read_text().splitlines():
        if line.startswith("## "):
            task = line[3:].split(":")[0]
        elif match := TABLE.match(line):
            variant, size = match["variant"], int(match["size"])
        elif line.startswith("| strategy | ") and variant is not None:
            positions = [c.strip().rsplit(" ", 1)[-1] for c in line.strip("|").split("|")[1:-1]]
        elif line.startswith("### "):
            variant = None
        elif line.startswith("| ") and variant is not None and positions and " ± " in line:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            for position, cell in zip(positions, cells[1:-1], strict=True):
                if cell:
                    values = scores[(task, variant, size, cells[0], position)]  # type: ignore[index]
                    assert float(cell.split(" ± ")[0]) == pytest.approx(sum(values) / len(values), abs=5e-4)
                    checked += 1
    assert checked >= 60


def test_a_proxy_loads_the_written_policy_and_auto_applies_it(report: Path, tmp_path: Path) -> None:
    import httpx

    from tests.e2e.local_serving import serving
    from tests.e2e.test_strategies_on_local_model import MESSAGES

    policy = report / "policy.toml"
    rules = re.findall(r'^strategy = "(.*)"$', policy.read_text(), re.M)
    # The quick profile is a smoke test: its report says so, and it never yields a rule, whatever it measured.
    assert "**Smoke test**" in (report / "report.md").read_text()
    assert rules == []
    assert "a smoke test" in policy.read_text()
    with serving(tmp_path / "serve.log", policy_file=str(policy)) as url:
        body = {"model": "smollm2", "messages": MESSAGES, "max_tokens": 8}
        response = httpx.post(
            f"{url}/v1/chat/completions", json=body, headers={"X-Context-Strategy": "auto"}, timeout=300
        )
    assert response.status_code == 200
    expected = rules[0] if rules else "none"
    assert response.headers["x-context-strategy"].startswith(expected)
    assert response.headers["x-context-policy"].startswith("rule=" if rules else "none; reason=no-rule-matched")


def test_the_embedded_model_answers_the_re_asked_cases_as_before_and_the_report_names_it(report: Path) -> None:
    data = json.loads((report / "results.json").read_text())
    floors = data["noise_floor"]
    assert floors, "the run asked `none` again"
    assert [(r["task"], r["variant"], r["answers_changed"], r["floor"]) for r in floors if r["answers_changed"]] == []
    [(fingerprint, identity)] = json.loads((report / "run.json").read_text())["upstreams"].items()
    assert len(identity["model_sha256"]) == 64
    assert identity["settings"]["reuse_prompt"] is False
    assert (
        f"- upstream `{fingerprint}`: `smollm2-135m-instruct`: SmolLM2-135M-Instruct.Q4_1.gguf"
        in (report / "report.md").read_text()
    )
