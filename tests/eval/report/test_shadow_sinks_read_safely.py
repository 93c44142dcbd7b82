"""The sink reader reads regular files only, line by line: a FIFO named `*.jsonl` in a sink folder is passed
over (it would block the report forever), one named on its own is a clear error, a line past MAX_LINE_BYTES is
skipped and counted without being held, and the report keeps only the fields it reads of each record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextlift.eval import sinks
from contextlift.eval.sinks import read_sinks

RECORD: dict[str, Any] = {
    "time": "2026-01-02T00:00:00",
    "model": "m",
    "position_sensitive": True,
    "calls": 1,
    "tokens": 10,
    "seconds": 0.1,
    "candidates": [{"strategy": "reorder", "agrees": True, "exact": False, "calls": 1, "tokens": 9, "seconds": 0.1}],
    "captured": {"body": {"messages": [{"role": "user", "content": "x" * 10_000}]}, "served": "answer"},
}


def test_a_fifo_in_a_sink_folder_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "pod-a.jsonl").write_text(json.dumps(RECORD) + "\n")
    os.mkfifo(tmp_path / "pod-b.jsonl")
    # In a child process: on the previous code the read blocks forever, and only a timeout ends it.
    script = (
        "from pathlib import Path; from contextlift.eval.sinks import read_sinks; "
        f"print(len(read_sinks([Path({str(tmp_path)!r})]).records))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20)
    assert result.stdout.strip() == "1", result.stderr


def test_a_fifo_named_on_its_own_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "sink.jsonl")
    with pytest.raises(ValueError, match="not a regular file"):
        read_sinks([tmp_path / "sink.jsonl"])


def test_a_line_past_the_bound_is_skipped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sinks, "MAX_LINE_BYTES", 4096)
    line = json.dumps(RECORD)
    small = json.dumps({**RECORD, "captured": None})
    (tmp_path / "sink.jsonl").write_text(f"{small}\n{line}\n{small}\n{line}")
    read = read_sinks([tmp_path / "sink.jsonl"])
    assert (len(read.records), read.skipped) == (2, 2)


def test_the_report_keeps_only_the_fields_it_reads(tmp_path: Path) -> None:
    (tmp_path / "sink.jsonl").write_text(json.dumps(RECORD) + "\n")
    (report,) = read_sinks([tmp_path / "sink.jsonl"], whole=False).records
    (whole,) = read_sinks([tmp_path / "sink.jsonl"]).records
    assert "captured" not in report
    assert whole["captured"] == RECORD["captured"]
    assert {k: whole[k] for k in report} == report
