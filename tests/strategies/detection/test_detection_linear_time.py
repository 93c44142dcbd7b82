"""Detection and rendering take time linear in the prompt: 1 MB built to make a scanner backtrack or search
again for every opening costs a fraction of a second, where a quadratic scan would take many minutes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.builtin.recite import recited_evidence
from tests.cpu_time import cpu_clock
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import ScriptedUpstream

MB = 1_000_000
BOUND_SECONDS = 3.0
"""Generous on a loaded machine: each case takes well under half a second, a quadratic scan minutes."""


def megabyte(unit: str, head: str = "", tail: str = "") -> str:
    return head + unit * ((MB - len(head) - len(tail)) // len(unit)) + tail


def cpu_seconds(work: Callable[[], Any]) -> float:
    with cpu_clock() as elapsed:
        work()
        return elapsed()


def body(content: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


HOSTILE_PROMPTS = {
    # `"<doc>" * 16000` (80 KB) took 11.5 s: every opening searched the rest of the text for its closing tag.
    "xml-openings": megabyte("<doc>"),
    "xml-long-openings": megabyte("<document>"),
    "xml-unclosed-attributes": megabyte("<doc "),
    "xml-attributes-closed-at-the-end": megabyte("<doc ", tail=">"),
    "xml-near-closing-tags": megabyte("</doc" + " " * 20, head="<doc>"),
    "xml-unclosed-title": megabyte('title="', head="<doc ", tail="></doc>"),
    "xml-many-documents": megabyte("<doc>x</doc>"),
    # Lines that open an element and never close it: 200,000 open tags kept and read eight times took 7 s.
    "xml-unclosed-line-openings": megabyte("<doc>\n"),
    "paired-label-openings": megabyte("[CONTEXT 0]:\n"),
    "paired-labels-counting-up": "".join(f"[CONTEXT {i}]:\nx\n[END CONTEXT {i}]\n" for i in range(40_000)),
    "fence-lines-between-separators": megabyte("a\n\n---\n\n```\n", head="Context:\n"),
    "litm-unclosed-titles": megabyte("Document [1](Title: "),
    "litm-title-parentheses": megabyte(")x", head="Document [1](Title: "),
    "litm-many-documents": megabyte("Document [1](Title: t) x\n"),
    "headed-many-headers": megabyte("Document 1:\n"),
    "headed-many-headings": megabyte("## Document 1\n"),
    "headed-blank-lines-without-a-cue": megabyte("\n \t", head="Document 1: x"),
    "headed-near-cues": megabyte("\n\n# Questio", head="Document 1: x"),
    "json-unterminated-object": megabyte('"a":1,', head="{"),
    "json-escaped-quotes": megabyte('\\"', head='{"a":"'),
    "json-open-braces": megabyte("{"),
    "json-arrays": megabyte("[],", head='{"a":['),
    # Fifty nested objects, each failing to decode only at the very end of the text.
    "json-failing-late-fifty-times": "".join(f'{{"a{i}":[' + "1," * (MB // 100) + '1],"b":' for i in range(50)),
    "json-many-records": megabyte('"k":"v",', head="{", tail='"z":"v"}'),
    # A JSON list pasted into a user message: each opening line is decoded once, whatever its lists hold.
    "json-list-openings": megabyte("[\n"),
    # A decode error's message counts the lines before it: in the whole text, each failed list cost the prompt.
    "json-lists-each-invalid": megabyte('[{"a" 1}]\n'),
    "json-lists-unclosed-string": megabyte('[{"a": "b}]\n'),
    "json-lists-failing-late": megabyte("[" + "1," * 1000 + "x\n"),
    "json-lists-that-are-no-documents": megabyte('[{"text":"a"},{"text":"b"}]\n'),
    "json-lists-of-documents-then-no-line-end": megabyte('[{"text":"a b"},{"text":"c d"}] x\n'),
    # The question's heading and the instruction that ends in a colon, and lines that almost are.
    "question-headings": megabyte("## Question\n", head="Context:\n"),
    "question-instructions-without-colon": megabyte(f"Based on {'a' * 100}, answer the question {'b' * 150}\n"),
    "question-instructions-long-prefix": megabyte("using " + "a, " * 2000 + "\n", head="Context:\nx\n\n"),
    "question-lines": megabyte("question" + " " * 30 + "\n"),
    # The app templates (strategies.detection.apps): label lines and near-labels between the template's sentences.
    "app-ragflow-tree-lines": megabyte("├── x\n", head="Here is the knowledge base:\n------\nID: 0\n"),
    "app-ragflow-nodes": "Here is the knowledge base:\n------\n"
    + "\n\n------\n\n\n".join(f"ID: {i}\n└── Content:\nx" for i in range(40_000))
    + "\nThe above is the knowledge base.",
    "app-quivr-labels": megabyte(
        "Filename: f\nSource: 0 \n x\n\n", head="- You have access to the following context to complete the task: "
    ),
    "app-kotaemon-units": megabyte(
        "<br><b>Content from f: </b> x \n<br>", head="don't try to make up an answer. Give answer in English.\n\n"
    ),
    "app-kotaemon-titles": megabyte(
        ": ", head="don't try to make up an answer. Give answer in x.\n\n<br><b>Content from "
    ),
    "app-khoj-items": megabyte("- query: q\n  compiled: x\n", head="User's Notes:\n-----\n"),
    "app-verba-titles": "Answer this query: 'q' with this provided context: "
    + "\n\n\n".join(f"Document Title: {i}\nChunk: 1\nx" for i in range(40_000)),
    "app-qanything-references": megabyte("<reference>[1]\nx\n</reference>\n", head="\n<DOCUMENTS>\n"),
    # The grammar of labelled units (strategies.detection.elements, the JSON lines, the labels that count or close).
    "elements-openings-of-one-name": megabyte("<chunk>\n"),
    "elements-many-names": "".join(f"<t{i}>\n<t{i}>\n" for i in range(60_000)),
    "elements-many-units": megabyte("<chunk>x y</chunk>\n", tail="Question: q?"),
    "elements-unclosed-attributes": megabyte("<chunk a=" + "x" * 100 + "\n"),
    "json-lines-openings": megabyte("{\n"),
    "json-lines-long-line": "{" + '"a": "b", ' * 100_000 + '"c": "d"}\n{"a": "b"}',
    "json-lines-many-objects": megabyte('{"id": 1, "content": "a b"}\n', tail="Question: q?"),
    "closing-labels": megabyte(
        "Content: a\nSource: s\n\n", head="QUESTION: q\n=========\n", tail="=========\nFINAL ANSWER:"
    ),
    "counted-headings": "Context:\n\n" + "\n\n".join(f"### {i}. t\nx" for i in range(1, 60_000)),
    "fences-before-an-answer": megabyte("=========\n", tail="FINAL ANSWER:"),
    "setext-titles": megabyte("a\n---\n\n", head="Context:\n"),
}
SPACES = " " * 40_000
"""The probe's reproductions of backtracking: a run of spaces between two patterns that could each take it."""
HOSTILE_PROMPTS |= {
    # `remember[ \t]*(?:to|that|:)?[ \t]*` in a repeat: 145 characters took 157 s.
    "instruction-reminders": "remember    " * 200 + "x",
    "answer-slot-spaces": "Question: q\n-----\na\n-----\nAnswer:" + SPACES + "x",
    "question-heading-spaces": "<document>a</document><document>b</document>\n## Question" + SPACES + "x",
    "bold-question-spaces": "Context:\nSource 1: a\n\nSource 2: b\n\n**Question**" + SPACES + "x",
}


# The hardening issues' reproductions, at their own sizes: seconds each before, and quick to show it.
REPORTED = {
    "reported-doc-openings": "<doc>" * 16_000,
    "reported-doc-attributes": "<doc " * 16_000,
    "reported-document-openings": "<document>" * 12_000,
}


@pytest.mark.parametrize("prompt", [*REPORTED.values(), *HOSTILE_PROMPTS.values()], ids=[*REPORTED, *HOSTILE_PROMPTS])
def test_a_hostile_prompt_is_parsed_and_rendered_in_linear_time(prompt: str) -> None:
    def parse_and_render() -> None:
        request = parse_request(body(prompt))
        request.with_documents(request.documents[::-1]).render()

    assert cpu_seconds(parse_and_render) < BOUND_SECONDS


async def test_forty_thousand_identical_parts_trimmed_to_one_render_in_linear_time() -> None:
    parts = [{"type": "text", "text": "the same short passage"}] * 40_000 + [{"type": "text", "text": "which?"}]
    pipeline = build_registry().resolve(parse_selection("reorder; budget=1"), {})
    upstream = ScriptedUpstream("ok")

    async def run() -> None:
        request = parse_request(body(parts))
        await run_pipeline(pipeline, request, upstream, Services(embedder=FakeEmbedder()))

    with cpu_clock() as elapsed:
        await run()
    assert elapsed() < BOUND_SECONDS
    sent = upstream.bodies[0]["messages"][0]["content"]
    assert sent == [{"type": "text", "text": "the same short passage"}, {"type": "text", "text": "which?"}]


def test_a_recitation_of_a_long_whitespace_run_is_read_in_linear_time() -> None:
    request = parse_request(body("Document [1](Title: A) alpha beta gamma\nDocument [2](Title: B) delta\n\nQ: a?"))
    # 30,000 spaces after a bullet took 8 s: two patterns in a row could each take any share of them.
    recitation = "- " + " " * 30_000 + "x\n" + "Document [1]: alpha beta gamma"
    evidence: list[Any] = []
    assert cpu_seconds(lambda: evidence.extend(recited_evidence(recitation, request).evidence)) < BOUND_SECONDS
    assert [d.text for d in evidence] == ["alpha beta gamma"]


@pytest.mark.parametrize(
    "prompt",
    [
        "Document [" + "1" * 5000 + "] a\nDocument [2] b",
        "Document " + "1" * 5000 + ": a\n\nDocument 2: b",
        '<doc index="' + "1" * 5000 + '">a</doc><doc index="2">b</doc>',
    ],
    ids=["litm", "headed", "xml"],
)
def test_a_document_number_of_thousands_of_digits_is_no_position(prompt: str) -> None:
    # `int` refuses a string of more than 4,300 digits: such a number used to fail the whole request.
    request = parse_request(body(prompt))
    assert len(request.documents) == 2
    assert request.block is not None
    assert request.block.numbering_base is None
    assert request.with_documents(request.documents[::-1]).with_documents(request.documents).render() == body(prompt)


def many_documents(count: int) -> dict[str, Any]:
    # Every document shares most of its words with every other: each recited line matches all of them.
    lines = "\n".join(f"Document [{i}](Title: T{i}) the shared river town story number {i} again" for i in range(count))
    return body(f"{lines}\n\nQuestion: which river town?")


def test_a_megabyte_recitation_against_many_similar_documents_is_read_in_bounded_time() -> None:
    request = parse_request(many_documents(1_000))
    assert len(request.documents) == 1_000
    recitation = megabyte("shared river town story number again\n")
    found: list[Any] = []
    assert cpu_seconds(lambda: found.append(recited_evidence(recitation, request))) < BOUND_SECONDS
    assert found[0].evidence  # the lines do occur in the documents


def test_a_megabyte_retrieval_answer_is_read_in_bounded_time() -> None:
    from contextlift.strategies.builtin.fact import _Remaining

    request = parse_request(many_documents(1_000))
    remaining = _Remaining(list(request.documents))
    assert remaining.retrieval_body(request, 64) is not None
    answer = megabyte("- the shared river town story number 7 again\n")
    assert cpu_seconds(lambda: remaining.take_facts(answer)) < BOUND_SECONDS
