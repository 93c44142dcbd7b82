"""docs/eval-options.md's run in LangChain's stuff shape says how the proxy reads that prompt now, as
`contextlift detect` prints it for the eval's own rendering of `create_stuff_documents_chain` (documents joined by a
blank line): the run read each paragraph as a document, which the proxy no longer does unasked, and the page names
the parameter that asks for that reading again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextlift.eval.tasks.litm import Passage
from contextlift.eval.tasks.prompt_shapes import SHAPES
from contextlift.proxy.cli import main

ROOT = Path(__file__).resolve().parents[2]
SECTION = "**In the shape your app sends.**"
PASSAGES = [
    Passage("K2", "K2 lies in the Karakoram range, on the border of Pakistan and China."),
    Passage("Danube", "The Danube flows through ten countries before reaching the Black Sea."),
    Passage("Mont Blanc", "Mont Blanc is the highest mountain in the Alps, at 4,805 metres."),
]


def section() -> str:
    page = (ROOT / "docs" / "eval-options.md").read_text(encoding="utf-8")
    return " ".join(page.split(SECTION, 1)[1].split("\n\n**", 1)[0].split())


def detected(tmp_path: Path, capsys: pytest.CaptureFixture[str], *strategy: str) -> str:
    chat = SHAPES["langchain-stuff"]("What is the highest mountain in the Alps?", PASSAGES)
    messages = [{"role": "system", "content": chat.system}, {"role": "user", "content": chat.user}]
    body = {"model": "m", "messages": messages}
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    capsys.readouterr()
    assert main(["detect", str(path), *strategy]) == 0
    return capsys.readouterr().out.splitlines()[0].removeprefix("format: ")


def test_the_page_says_what_detect_reads_in_the_langchain_stuff_prompt_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reading = detected(tmp_path, capsys)
    assert reading == "none: ambiguous-chunks"
    assert f"for this prompt `contextlift detect` says `{reading}`" in section()


def test_the_page_names_the_parameter_that_reads_it_as_the_run_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reading = detected(tmp_path, capsys, "--strategy", "reorder; format=paragraphs")
    assert f"That run read each blank-line-separated paragraph as a document (`{reading}`)" in section()
    assert "asked for with `reorder; format=paragraphs`" in section()
