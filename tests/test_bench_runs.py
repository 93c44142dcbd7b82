"""scripts/bench.py, the performance benchmark the README quotes, still runs end to end (a smoke run: its figures
are printed for people, never asserted on)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_benchmark_runs_and_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert set(figures["throughput"]["contextlift"]) == {"16", "64", "256"}
    assert all(row["errors"] == 0 for row in figures["throughput"]["contextlift"].values())
    assert set(figures["strategies_at_200ms"]) >= {"none", "reorder", "recite", "medoid; k=3"}
    assert "| added latency, small body, p50 / p99 ms |" in done.stdout
    assert set(figures["reorder_cpu"]["rankers"]) == {"minilm", "client", "lexical", "fusion"}
    assert figures["machine"]["step_ns"] > 0
    assert figures["machine"]["step_ns_after"] > 0
    assert "host speed: a fixed Python step on the proxy's core took" in done.stdout


def test_the_cpu_measure_reports_each_proxy_three_times(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), "--cpu", "20",
         "--variant", "light:CONTEXTLIFT_EMBEDDER=off", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())["cpu_per_request"]
    assert set(figures) == {"default", "light"}
    assert all(len(runs) == 3 for runs in figures.values())
    assert all(run > 0 for runs in figures.values() for run in runs)
    assert "| light |" in done.stdout


def test_the_stage_marks_still_find_their_layers() -> None:
    """scripts/request_stages.py wraps the proxy's internals by name: a rename it missed fails here, not in use."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "request_stages.py"), "--requests", "30"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "first byte to last byte" in done.stdout, done.stderr[-3000:]
    assert "11 answer body read" in done.stdout
