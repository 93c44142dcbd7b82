"""`contextlift detect` prints what the proxy finds in a request body: for a body LlamaIndex built, the format,
the question and each document with its span; from a file or standard input; bad input exits 2 with a reason."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from proxy.cli import main
from tests.strategies.framework_prompts import framework_prompts


def llamaindex_body() -> dict[str, Any]:
    return next(p for p in framework_prompts() if p.name == "llamaindex-query-engine").body


def test_a_llamaindex_prompt_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(llamaindex_body()))
    assert main(["detect", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "format: metadata-blocks; region=fence"
    assert lines[1] == "documents: 5"
    assert lines[2] == "in: message 1"
    assert lines[3] == "question: 'when is the last time the philadelphia won the superbowl'"
    assert sum(1 for line in lines if line.startswith("  [")) == 5
    assert "title: " in lines[-1]


def test_json_output_from_standard_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    body = llamaindex_body()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(body).encode())))
    assert main(["detect", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    content = body["messages"][found["message_index"]]["content"]
    for document in found["documents"]:
        start, end = document["span"]
        assert content[start:end] == document["text"]


def test_a_named_shape_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(llamaindex_body()))
    assert main(["detect", "--format", "numbered", str(path)]) == 0
    assert capsys.readouterr().out.startswith("format: none: no-context-region\ndocuments: 0\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"{nope", "not valid JSON"), (b"[]", "must be a JSON object"), (b'{"model": "m"}', "'messages' is required")],
)
def test_bad_input_exits_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(content)
    assert main(["detect", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
