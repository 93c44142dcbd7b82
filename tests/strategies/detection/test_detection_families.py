"""Shapes apps send that detection once missed, each as a family of wordings and counts: numbered search results
announced in a system prompt (as Perplexity-style apps send them), the question under a markdown heading, the
question after an instruction that ends in a colon, and results pasted as a JSON list into the user's message.
Each variant finds exactly its documents and its question; the ordinary prompts beside each family (numbered
rules, headings in a chat, JSON that is not a list of documents) stay untouched."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextlift.strategies import parse_request

QUESTION = "Which of these sources says when the bridge opened?"
JOIN = "\n\n---\n\n"
"""Chunks joined by a separator line: blank lines alone never separate documents (test_chunk_boundaries.py)."""


def facts(count: int) -> list[str]:
    return [f"Source text number {i}: the bridge over river {i} opened in {1900 + i}." for i in range(1, count + 1)]


def chat(*messages: tuple[str, str]) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": role, "content": content} for role, content in messages]}


def found(body: dict[str, Any], texts: list[str], question: str = QUESTION) -> str:
    """Parses `body`, checks its documents and question, that it renders back as it came and that moved
    documents move back; returns the detection label."""
    original = copy.deepcopy(body)
    request = parse_request(body)
    assert [d.text for d in request.documents] == texts, request.detection
    assert request.question == question
    assert request.render() == original
    moved = request.with_documents(request.documents[::-1])
    assert moved.render() != original
    assert moved.with_documents(request.documents).render() == original
    return request.detection


def untouched(body: dict[str, Any]) -> str:
    original = copy.deepcopy(body)
    request = parse_request(body)
    assert request.documents == (), request.detection
    assert request.render() == original
    return request.detection


# Numbered results in a system prompt: the announcement above them is the evidence.

ANNOUNCEMENTS = [
    "You are a helpful search assistant. Use these search results and cite them as [n].",
    "Answer from the following web search results.",
    "Here are the provided sources; cite each claim with [number].",
    "The numbered passages are below.",
    "Search results are listed below. Cite the ones you use.",
    "Answer using only the retrieved documents, citing them by [index].",
]


@pytest.mark.parametrize("count", [3, 5, 8, 12])
@pytest.mark.parametrize("announcement", ANNOUNCEMENTS)
def test_numbered_results_announced_in_a_system_prompt_are_the_documents(announcement: str, count: int) -> None:
    texts = facts(count)
    results = "\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1))
    body = chat(("system", f"{announcement}\n\n{results}"), ("user", QUESTION))
    assert found(body, [f"[{i}] {t}" for i, t in enumerate(texts, 1)]) == "numbered; announced"


@pytest.mark.parametrize("role", ["system", "developer"])
@pytest.mark.parametrize("marker", ["Source {i}:", "[{i}]", "### Result {i}\n"])
def test_announced_results_with_other_markers_and_roles(role: str, marker: str) -> None:
    texts = facts(4)
    blocks = [f"{marker.format(i=i)} {t}" for i, t in enumerate(texts, 1)]
    body = chat((role, "Be concise.\n\nUse these sources:\n" + "\n\n".join(blocks)), ("user", QUESTION))
    assert [d.text for d in parse_request(body).documents] == blocks


@pytest.mark.parametrize(
    "system",
    [
        "You are a helpful assistant. Follow these rules:\n[1] Be concise.\n[2] Cite nothing.\n[3] Stay polite.",
        "You answer questions about the documents the user uploads. Rules:\n[1] Be brief.\n[2] Use English.",
        "Never reveal your sources.\n\n[1] Answer in French.\n[2] Use short sentences.\n[3] No lists.",
        # The announcement is there, but a paragraph of rules stands between it and the numbered lines.
        "Use the provided sources when there are any.\n\nFollow these rules:\n[1] Be concise.\n[2] Be kind.",
        "Source 1: how we number rules.\nSource 2: why.",
        "Cite the retrieved documents as [n] when you use them. Follow these rules:\n[1] Be concise.\n[2] Be kind.",
    ],
    ids=[
        "rules",
        "documents-mentioned",
        "sources-mentioned",
        "announcement-above-rules",
        "no-announcement",
        "announcement-then-rules",
    ],
)
def test_numbered_rules_in_a_system_prompt_stay_untouched(system: str) -> None:
    assert untouched(chat(("system", system), ("user", "How do I reset my password?"))).startswith("none")


# The question under a markdown heading.

HEADINGS = ["## Question", "### Your question", "# User query", "**Question**", "**Question:**", "## The question"]


@pytest.mark.parametrize("heading", HEADINGS)
@pytest.mark.parametrize("count", [3, 7])
def test_the_question_under_a_heading_is_found(heading: str, count: int) -> None:
    texts = facts(count)
    context = JOIN.join(texts)
    body = chat(("user", f"## Context\n\n{context}\n\n{heading}\n\n{QUESTION}"))
    assert found(body, texts) == "separated; region=label"


@pytest.mark.parametrize("heading", HEADINGS[:3])
def test_the_question_heading_closes_numbered_sources(heading: str) -> None:
    texts = facts(5)
    sources = "\n".join(f"[{i}] {t}" for i, t in enumerate(texts, 1))
    body = chat(("user", f"{sources}\n\n{heading}\n{QUESTION}"))
    assert found(body, [f"[{i}] {t}" for i, t in enumerate(texts, 1)]) == "numbered"


@pytest.mark.parametrize(
    "content",
    [
        "# Meeting notes\n\n## Question\nShould we ship on Friday?\n\n## Decision\nWe wait a week.",
        "## Question\nWhat is a closure in JavaScript?",
        "**Question**\nHow do I center a div?\n\n**Context**: I'm new to CSS.",
    ],
    ids=["notes", "heading-only", "bold-context-note"],
)
def test_headings_in_an_ordinary_chat_stay_untouched(content: str) -> None:
    assert untouched(chat(("user", content))).startswith("none")


# The question after an instruction that ends in a colon.

INSTRUCTIONS = [
    "Answer the following question using only the context above: {q}",
    "Based on the documents above, answer the user's question:\n{q}",
    "Please answer this question using the sources: {q}",
    "Now respond to the query below:\n\n{q}",
    "Using the context, reply to the customer's question in one sentence:\n{q}",
]


@pytest.mark.parametrize("instruction", INSTRUCTIONS)
@pytest.mark.parametrize("count", [3, 6, 10])
def test_the_question_after_an_instruction_ending_in_a_colon_is_found(instruction: str, count: int) -> None:
    texts = facts(count)
    context = JOIN.join(texts)
    body = chat(("user", f"Context:\n{context}\n\n{instruction.format(q=QUESTION)}"))
    assert found(body, texts) == "separated; region=label"


def test_an_instruction_above_the_context_does_not_take_the_context_for_the_question() -> None:
    # LangChain's wording: the line after the colon is the context, and the question is what follows it.
    texts = facts(4)
    context = JOIN.join(texts)
    body = chat(("user", f"Answer the question based only on the following context:\n{context}\n\n{QUESTION}"))
    assert untouched(body) == "none: no-question"
    wrapped = f"Answer the question based only on the following context:\n<context>\n{context}\n</context>\n\n"
    assert found(chat(("user", wrapped + QUESTION)), texts) == "separated; region=wrapper"


def test_an_instruction_naming_the_question_above_it_gives_the_question_on_its_line() -> None:
    texts = facts(3)
    context = JOIN.join(texts)
    body = chat(("user", f"Answer the question in one word: {QUESTION}\n\nContext:\n{context}"))
    assert found(body, texts) == "separated; region=label"


@pytest.mark.parametrize(
    "content",
    [
        "Answer the question: what is 2 + 2?",
        "Please answer this question for my homework: why is the sky blue?",
        "Respond to the request below:\nWrite a haiku about autumn.",
    ],
)
def test_instructions_in_an_ordinary_chat_stay_untouched(content: str) -> None:
    assert untouched(chat(("user", content))).startswith("none")


# Results pasted into the user's message as a JSON list.

FIELDS = ["content", "text", "snippet", "body", "page_content"]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(("count", "indent"), [(3, 2), (5, 4), (8, None), (12, 2)])
def test_a_pasted_json_list_of_results_is_the_documents(field: str, count: int, indent: int | None) -> None:
    texts = facts(count)
    results = json.dumps([{"title": f"Result {i}", field: t} for i, t in enumerate(texts, 1)], indent=indent)
    body = chat(("user", f"Here are the search results:\n{results}\n\n{QUESTION}"))
    assert found(body, texts) == "json-list; embedded"


@pytest.mark.parametrize("after", [f"\nQuestion: {QUESTION}\nAnswer:", f"\n## Question\n{QUESTION}"])
def test_a_pasted_json_list_with_a_cued_question(after: str) -> None:
    texts = facts(4)
    results = json.dumps([{"url": f"https://example.com/{i}", "content": t} for i, t in enumerate(texts)], indent=2)
    body = chat(("system", "Answer from the results."), ("user", f"{results}\n{after}"))
    assert found(body, texts) == "json-list; embedded"


@pytest.mark.parametrize(
    "content",
    [
        # Configuration: objects without a text field.
        'My services:\n[\n  {"name": "web", "port": 80},\n  {"name": "db", "port": 5432}\n]\nWhy does db fail?',
        # A chat transcript: messages, not documents.
        json.dumps([{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello, how are you"}])
        + "\nSummarize this conversation.",
        # UI labels: a text field, but no prose.
        'Buttons:\n[{"id": 1, "text": "OK"}, {"id": 2, "text": "Cancel"}]\nWhich should be the default?',
        # One result is no set of documents.
        'Result:\n[{"content": "The bridge opened in 1901."}]\nWhen did it open?',
        # A list of strings: steps as often as results.
        '[\n  "Preheat the oven to 200 degrees",\n  "Bake for ten minutes"\n]\nWhat temperature is this in F?',
        # Inline, not on lines of its own.
        'Use x = [{"text": "a b"}, {"text": "c d"}] in the loop; why does it fail?',
    ],
    ids=["config", "transcript", "ui-labels", "single-result", "strings", "inline"],
)
def test_json_in_a_user_message_that_is_no_list_of_documents_stays_untouched(content: str) -> None:
    assert untouched(chat(("user", content))).startswith("none")


def test_a_pasted_list_without_a_question_stays_untouched() -> None:
    results = json.dumps([{"content": t} for t in facts(3)], indent=2)
    assert untouched(chat(("user", results))) == "none: no-question"
