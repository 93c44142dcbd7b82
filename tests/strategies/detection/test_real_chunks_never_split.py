"""No retrieved chunk is ever cut in two: requests built by LangChain's and LlamaIndex's own chains and templates over
chunks their own splitters cut from real text (`tests/strategies/real_chunks.py`), each chunk holding paragraphs.

For every family of joins, detection either reads each chunk whole, as the framework wrote it (header or number
included), or declines with a reason; a reorder of what it read keeps every chunk whole and contiguous, and the
instructions, question and other messages byte for byte.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextlift.strategies import parse_request
from tests.strategies.real_chunks import DECLINED, FAMILIES, chunk_prompt

CASES = [
    (family, source, splitter)
    for family in FAMILIES
    for source in ("pydoc", "squad")
    for splitter in ("langchain", "llamaindex")
]
EXPECTED_FORMAT = {
    "langchain-default": "none: ambiguous-chunks",
    "langchain-dashes": "separated; region=cue",
    "langchain-dashes-spaced": "separated; region=cue",
    "langchain-stars": "separated; region=cue",
    "langchain-three-newlines": "separated; region=cue",
    "langchain-doc-wrapper": "xml",
    "langchain-source-header": "separated; region=cue",
    "langchain-legacy-stuff": "none: ambiguous-chunks",
    "langchain-legacy-dashes": "separated; region=fence",
    "llamaindex-metadata": "metadata-blocks; region=fence",
    "llamaindex-plain": "none: ambiguous-chunks",
    "app-context-label": "none: ambiguous-chunks",
    "app-numbered": "numbered; region=label",
}


def test_every_family_has_an_expected_outcome() -> None:
    assert set(EXPECTED_FORMAT) == set(FAMILIES)
    assert {f for f, shown in EXPECTED_FORMAT.items() if shown.startswith("none")} == DECLINED


@pytest.mark.parametrize(("family", "source", "splitter"), CASES)
def test_chunks_are_read_whole_or_declined(family: str, source: str, splitter: str) -> None:
    prompt = chunk_prompt(family, source, splitter)
    assert sum("\n\n" in c.strip() for c in prompt.chunks) >= 2, "the fixture should hold multi-paragraph chunks"
    request = parse_request(copy.deepcopy(prompt.body))
    assert request.render() == prompt.body
    if family in DECLINED:
        assert request.detection == "none: ambiguous-chunks"
        assert request.documents == ()
        return
    assert request.detection == EXPECTED_FORMAT[family]
    assert [d.raw.strip() for d in request.documents] == [w.strip() for w in prompt.written]


@pytest.mark.parametrize(("family", "source", "splitter"), [c for c in CASES if c[0] not in DECLINED])
def test_a_reorder_moves_whole_chunks_only(family: str, source: str, splitter: str) -> None:
    prompt = chunk_prompt(family, source, splitter)
    request = parse_request(copy.deepcopy(prompt.body))
    assert request.documents, request.detection
    assert request.block is not None
    index, head, tail = request.block.message_index, request.block.head, request.block.tail
    reordered = request.with_documents(request.documents[::-1]).render()
    text = _document_text(reordered, index)
    positions = [text.find(w.strip()) for w in prompt.written]
    assert all(p >= 0 for p in positions), "every chunk is in the body sent, whole"
    assert positions == sorted(positions, reverse=True), "in the new order"
    assert _document_text(prompt.body, index).startswith(head)
    assert text.startswith(head)
    assert text.endswith(tail)
    others = [m for i, m in enumerate(prompt.body["messages"]) if i != index]
    assert [m for i, m in enumerate(reordered["messages"]) if i != index] == others


def _document_text(body: dict[str, Any], index: int) -> str:
    content = body["messages"][index]["content"]
    return content if isinstance(content, str) else json.dumps(content)
