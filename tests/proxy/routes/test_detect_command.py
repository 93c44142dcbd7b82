"""`contextlift detect` prints what the proxy finds in a request body: for a body LlamaIndex built, the format,
the question and each document with its span; from a file or standard input; bad input exits 2 with a reason. With
`--strategy`, the body sent upstream, where the documents went (or why none moved) and what each ranked step ranked,
named as the client knows it: a document by its number, a unit of a context that cannot move as a unit."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy.cli import main
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


QUESTION = "How many countries do the Alps span?"
LANGCHAIN_CHUNKS = (
    "Mont Blanc is the highest mountain in the Alps.\n\nIt rises 4,806 metres above sea level.",
    "K2 is the second highest mountain on Earth.",
    "The Alps span eight countries.\n\nThey formed over tens of millions of years.",
)


def langchain_body(separator: str) -> dict[str, Any]:
    context = separator.join(LANGCHAIN_CHUNKS)
    prompt = f"Answer the question based only on the following context:\n{context}\n\nQuestion: {QUESTION}"
    return {"model": "m", "messages": [{"role": "user", "content": prompt}]}


def test_a_strategy_previews_the_body_sent_upstream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(langchain_body("\n---\n")))
    assert main(["detect", str(path), "--json", "--strategy", "reorder; order=descending; ranker=lexical"]) == 0
    preview = json.loads(capsys.readouterr().out)
    assert preview["format"] == "separated; region=cue"
    order = preview["order"]
    assert order[0] == 3
    assert sorted(order) == [1, 2, 3]
    sent = preview["body"]["messages"][0]["content"]
    assert sorted(LANGCHAIN_CHUNKS, key=sent.index) == [LANGCHAIN_CHUNKS[n - 1] for n in order]
    assert sent.endswith(f"\n\nQuestion: {QUESTION}")


def test_a_preview_that_moves_nothing_says_kept_and_shows_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = langchain_body("\n---\n")
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    assert main(["detect", str(path), "--strategy", "reorder; ranker=client"]) == 0
    out = capsys.readouterr().out
    assert "order: kept\n" in out
    assert json.loads(out.split("body sent upstream:\n", 1)[1]) == body


def test_blank_line_chunks_are_declined_with_what_would_make_them_readable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(langchain_body("\n\n")))
    assert main(["detect", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "format: none: ambiguous-chunks"
    assert lines[2].startswith("hint: ")
    assert "format=paragraphs" in lines[2]
    assert "---" in lines[2]


def test_an_invalid_strategy_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(langchain_body("\n---\n")))
    assert main(["detect", str(path), "--strategy", "reorderr"]) == 2
    assert capsys.readouterr().err.startswith("contextlift detect: ")


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_body_past_the_proxys_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], source: str
) -> None:
    monkeypatch.setenv("CONTEXTLIFT_MAX_BODY_BYTES", "2048")
    body = json.dumps(langchain_body("\n---\n") | {"padding": "x" * 4096}).encode()
    read: list[int] = []

    class Counted(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            chunk = super().read(size)
            read.append(len(chunk))
            return chunk

    if source == "file":
        path = tmp_path / "body.json"
        path.write_bytes(body)
        argv = ["detect", str(path)]
    else:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(Counted(body)))
        argv = ["detect"]
    assert main(argv) == 2
    assert "larger than max_body_bytes (2048 bytes), the most the proxy reads" in capsys.readouterr().err
    assert sum(read) <= 2049


ALPS = (
    "Answer the question based only on the following context:\n<doc>The Matterhorn is a mountain of the Alps.</doc>\n"
    "<doc>Mont Blanc is the highest mountain in the Alps, at 4,805 m.</doc>\n<doc>The Eiger is in the Bernese Alps."
    "</doc>\n\nQuestion: What is the highest mountain in the Alps?"
)


def test_each_ranked_step_prints_every_documents_rank_and_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "content": ALPS}]}))
    assert main(["detect", str(path), "--strategy", "reorder; ranker=lexical"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ranking of 'reorder; ranker=lexical' by lexical"))
    assert "margin " in lines[at]
    ranked = lines[at + 1 : at + 4]
    assert ranked[0].startswith("  rank 1: document 2, score ")
    assert sorted(line.split(",")[0].split("document ")[1] for line in ranked) == ["1", "2", "3"]
    assert main(["detect", str(path), "--strategy", "reorder; ranker=lexical", "--json"]) == 0
    preview = json.loads(capsys.readouterr().out)
    (ranking,) = preview["rankings"]
    assert ranking["ranker"] == "lexical"
    assert ranking["fallback"] is None
    assert ranking["documents"][0]["document"] == 2
    assert [d["rank"] for d in ranking["documents"]] == [1, 2, 3]


def test_a_preview_of_a_context_that_cannot_move_says_so_and_names_the_units_it_ranked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(langchain_body("\n\n")))
    assert main(["detect", str(path), "--strategy", "excerpt; ranker=lexical"]) == 0
    lines = capsys.readouterr().out.split("body sent upstream:\n", 1)[0].splitlines()
    assert lines[0] == "format: none: ambiguous-chunks"
    assert lines[3] == "order: none moved: the context's 5 units are a guess at its documents, read but never moved"
    ranked = [line for line in lines if line.startswith("  rank ")]
    assert len(ranked) == 5
    assert ranked[0].startswith("  rank 1: unit 4 of the context, score "), "'The Alps span eight countries.'"
    assert "None" not in "\n".join(lines)


def test_a_preview_without_documents_says_none_moved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body.json"
    path.write_text(
        json.dumps({"model": "m", "messages": [{"role": "user", "content": "What is the capital of France?"}]})
    )
    assert main(["detect", str(path), "--strategy", "reorder"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        "format: none: no-context-region",
        "documents: 0",
        "strategy: none",
        "order: none moved: no documents were found",
    ]
