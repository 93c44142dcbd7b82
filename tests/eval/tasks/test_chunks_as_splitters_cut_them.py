"""`--option litm-qa.chunks=paragraphs` (eval/tasks/chunks.py): each document is the chunk LangChain's own
`RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=0)` cuts first from the document's passage followed by
its drawn SQuAD paragraphs; the chunk holds two or more paragraphs, the same at every position, and no drawn
paragraph holds an answer. Skipped without SQuAD 2.0's dev file (tests/benchmark_data.py)."""

from __future__ import annotations

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from contextlift.eval.cases import Grid
from contextlift.eval.metrics import normalize_answer
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import litm_qa
from contextlift.eval.tasks.chunks import CHUNK_CHARACTERS, FOLLOWING, Chunker, chunker
from contextlift.eval.tasks.litm import Passage
from tests.benchmark_data import SQUAD, data_file


@pytest.fixture(scope="module")
def chunks() -> Chunker:
    return chunker(7, data_file(SQUAD))


def test_each_chunk_is_the_first_one_langchains_splitter_cuts(chunks: Chunker) -> None:
    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARACTERS, chunk_overlap=0)
    cases = litm_qa.build(Grid((10,), ("0",), 3, options={"distractors": "easy,hard"}), Sources())[0]
    passages = {p.text for c in cases if c.position is not None for p in _passages(c.prompt)}
    assert len(passages) >= 20
    for passage in sorted(passages):
        (chunk,) = chunks.chunked([Passage("t", passage)], ())
        following = chunks.following(passage)
        assert len(following) == FOLLOWING
        article = "\n\n".join([passage, *following])
        assert splitter.split_text(article)[0] == chunk.text
        assert "\n\n" in chunk.text, "two paragraphs or more"
        assert chunks.chunked([Passage("t", passage)], ()) == [chunk], "the same chunk wherever the passage is"


def test_no_drawn_paragraph_holds_an_answer(chunks: Chunker) -> None:
    answers = ("the", "Denver Broncos")  # "the" normalises to nothing: it is no answer to avoid
    (chunk,) = chunks.chunked([Passage("t", "Super Bowl 50 was an American football game.")], answers)
    assert "denver broncos" not in normalize_answer(chunk.text.split("\n\n", 1)[1])


def test_chunks_need_squad() -> None:
    with pytest.raises(ValueError, match="give the folder that holds it with --data"):
        litm_qa.build(Grid((10,), ("0",), 1, options={"chunks": "paragraphs"}), Sources())


def _passages(prompt: str) -> list[Passage]:
    lines = [line for line in prompt.splitlines() if line.startswith("Document [")]
    return [Passage("", line.split(") ", 1)[1]) for line in lines]
