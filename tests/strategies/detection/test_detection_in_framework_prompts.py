"""Detection in the prompts real frameworks send (fixtures built by LangChain, LlamaIndex, DSPy and the openai
SDK themselves, `framework_prompts.py`): every document found, in order; the question intact; the body rendered
back byte for byte; and with `reorder; order=descending` and the real all-MiniLM-L6-v2, the relevant document
first and the question where it was. Skipped without Lost in the Middle's oracle file (tests/benchmark_data.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextlift.strategies import SentenceTransformerEmbedder, Services, StepContext, parse_request
from contextlift.strategies.builtin.reorder import Reorder
from tests.strategies.framework_prompts import framework_prompts
from tests.strategies.scripted import ScriptedUpstream

EXPECTED_FORMAT = {
    "langchain-stuff-system": "none: ambiguous-chunks",
    "langchain-stuff-user": "none: ambiguous-chunks",
    "langchain-retrievalqa": "none: ambiguous-chunks",
    "langchain-load-qa-stuff": "none: ambiguous-chunks",
    "rag-prompt": "none: ambiguous-chunks",
    "llamaindex-synthesizer": "metadata-blocks; region=fence",
    "llamaindex-query-engine": "metadata-blocks; region=fence",
    "llamaindex-citation": "metadata-blocks; region=fence",
    "llamaindex-context-chat": "metadata-blocks; region=fence",
    "dspy-context": "numbered; region=label",
    "dspy-context-list-str": "json-list; region=label",
    "plain-context-question": "none: ambiguous-chunks",
    "system-per-document": "messages; role=system",
    "tool-per-document": "messages; role=tool",
    "tool-json-list": "json-list",
    "markdown-source-sections": "numbered",
    "bracket-citations": "numbered",
    "context-xml": "none: ambiguous-chunks",
    "anthropic-documents": "xml",
    "source-colon": "numbered",
    "retrieved-chunks": "numbered",
}
PROMPTS = {p.name: p for p in framework_prompts()}
DECLINED = {name for name, shown in EXPECTED_FORMAT.items() if shown.startswith("none")}
"""Shapes whose documents blank lines alone separate (LangChain's default join, `Context:` paragraphs): a chunk's
own paragraph break would look the same, so nothing is read and the request goes upstream as sent
(test_real_chunks_never_split.py shows the same frameworks' chunks read whole once a separator marks them)."""


def test_every_framework_shape_has_an_expected_format() -> None:
    assert set(PROMPTS) == set(EXPECTED_FORMAT)


@pytest.mark.parametrize("name", sorted(EXPECTED_FORMAT))
def test_the_documents_and_question_are_found(name: str) -> None:
    prompt = PROMPTS[name]
    body = copy.deepcopy(prompt.body)
    request = parse_request(body)
    assert request.detection == EXPECTED_FORMAT[name]
    if name in DECLINED:
        assert request.documents == ()
        assert request.render() == prompt.body
        return
    assert len(request.documents) == len(prompt.documents)
    for found, given in zip(request.documents, prompt.documents, strict=True):
        assert given[:80] in found.text
    assert _comparable(prompt.question) in _comparable(request.question)
    assert request.render() == prompt.body


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(device="cpu")


@pytest.mark.parametrize("name", sorted(set(EXPECTED_FORMAT) - DECLINED))
async def test_reorder_descending_puts_the_relevant_document_first(
    name: str, embedder: SentenceTransformerEmbedder
) -> None:
    prompt = PROMPTS[name]
    request = parse_request(copy.deepcopy(prompt.body))
    context = StepContext(ScriptedUpstream(), Services(embedder=embedder))
    reordered = await Reorder().transform(request, {"order": "descending", "top": 1}, context)
    assert prompt.documents[prompt.relevant][:80] in reordered.documents[0].text
    sent = reordered.render()
    text = json.dumps(sent["messages"], ensure_ascii=False)
    # In the body sent upstream the relevant document comes before every other one.
    assert reordered.block is not None
    base = reordered.block.numbering_base
    rendered = [
        d.rendered(None if base is None else base + i, reordered.block.format)
        for i, d in enumerate(reordered.documents)
    ]
    at = [text.index(json.dumps(r, ensure_ascii=False)[1:-1]) for r in rendered]
    assert at[0] == min(at)
    assert _comparable(prompt.question) in text
    assert _question_messages(sent) == _question_messages(prompt.body)


def _comparable(text: str) -> str:
    """Text as it reads in a body, whatever JSON escaping a shape used for it."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _question_messages(body: dict[str, Any]) -> list[Any]:
    """The user turns: never moved or changed by a reorder (for shapes whose documents sit elsewhere)."""
    return [m for m in body["messages"] if m.get("role") == "user" and not _holds_documents(m)]


def _holds_documents(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and any(
        _comparable(d[:80]) in _comparable(content) for p in PROMPTS.values() for d in p.documents
    )


def test_the_fixtures_cover_every_role_that_holds_documents() -> None:
    roles = {p.message_role for p in PROMPTS.values()}
    assert roles >= {"system", "user", "tool"}
