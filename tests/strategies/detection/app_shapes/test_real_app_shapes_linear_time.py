"""The scanners for real apps' shapes (context regions, numbered markers, a tool's JSON list, runs of
messages, declared formats, the question) stay linear: 1 MB built against each costs a fraction of a second
where a scan that searched again per marker would take minutes."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest

from contextlift.strategies import DeclaredFormat, DocumentLimitError, DocumentLimits, parse_request
from tests.cpu_time import cpu_clock

MB = 1_000_000
BOUND_SECONDS = 3.0
"""Generous on a loaded machine: each case takes well under a second; a quadratic scan takes minutes."""
PROXY_LIMITS = DocumentLimits(max_documents=2_000, max_document_bytes=8 << 20)
"""The proxy's defaults: what a hostile request meets."""


def megabyte(unit: str, head: str = "", tail: str = "") -> str:
    return head + unit * ((MB - len(head) - len(tail)) // len(unit)) + tail


def user(content: Any, *before: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [*before, {"role": "user", "content": content}]}


HOSTILE_TEXTS = {
    "fences-only": megabyte("------\n"),
    "fence-then-blank-lines": megabyte("\n\n", head="------\n", tail="\nQuestion: q"),
    "fence-like-lines": megabyte("-----x\n"),
    "labels-only": megabyte("Context:\n"),
    "label-then-paragraphs": megabyte("x\n\n", head="Context:\n", tail="Question: q"),
    "cue-sentences": megabyte("the following context "),
    "cue-without-line-break": megabyte("x ", head="Use the following documents"),
    "unclosed-wrappers": megabyte("<context>"),
    "unclosed-wrappers-of-every-tag": megabyte("<context><documents><sources><passages><knowledge>"),
    "near-closing-wrappers": megabyte("</context" + " " * 30, head="<context>"),
    "metadata-lines": megabyte("key: value\n", head="Context:\n"),
    "metadata-blocks": megabyte("title: t\n\ntext\n\n", head="Context:\n", tail="Question: q"),
    "numbered-markers": megabyte("[1] x\n"),
    "numbered-consecutive": "".join(f"[{i}] x\n" for i in range(1, 100_000)) + "Question: q",
    "source-markers-without-numbers": megabyte("Source \n"),
    "source-markers-long-numbers": megabyte("Source 12345678901234\n"),
    "question-cues": megabyte("Question:\n"),
    "dspy-field-lines": megabyte("[[ ## context ## ]]\n"),
    "end-cues-after-label": megabyte("Answer\n", head="Context: x\n"),
    # Two blank runs around an optional `#` made a marker word and 32,000 blanks cost 16 s.
    "marker-word-then-one-long-blank-line": megabyte(" ", head="Result"),
    "marker-words-then-long-blank-lines": megabyte("doc" + " " * 16_000 + "\n"),
    "marker-word-then-tabs": megabyte("\t", head="Source"),
    # Chunk boundaries (strategies/detection/chunks.py): separator lines, their look-alikes, blank runs, labels.
    "separator-lines-only": megabyte("---\n", head="Context:\n", tail="Question: q"),
    "separator-lines-of-two-kinds": megabyte("x\n---\ny\n***\n", head="Context:\n", tail="Question: q"),
    "title-underlines": megabyte("abc\n---\n\n", head="Context:\n", tail="Question: q"),
    "a-rule-line-that-ends-in-text": "Context:\n" + "-" * MB + "x\n\nQuestion: q",
    "spaced-rules-that-end-in-text": megabyte("* ", head="Context:\n", tail="x\n\nQuestion: q"),
    "blank-line-runs": megabyte("x\n\n\n", head="Context:\n", tail="Question: q"),
    "empty-labels-in-paragraphs": megabyte("a:\n\n", head="Context:\n", tail="Question: q"),
    "labels-then-blank-space": "Context:\na:\n\n" + " " * MB + "\nQuestion: q",
}


@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS)
def test_a_hostile_prompt_for_the_new_shapes_is_scanned_in_linear_time(text: str) -> None:
    for request_body in (user(text), user("q?", {"role": "system", "content": text})):
        with cpu_clock() as elapsed, contextlib.suppress(DocumentLimitError):
            request = parse_request(request_body, PROXY_LIMITS)
            request.with_documents(request.documents[::-1]).render()
        assert elapsed() < BOUND_SECONDS


@pytest.mark.parametrize(
    "content",
    [
        json.dumps([{"content": "x"}] * 60_000),
        "[" + "[" * 200_000,
        json.dumps(["x" * 10] * 80_000),
        "[" + '"\\"' * 300_000,
    ],
    ids=["many-results", "open-brackets", "many-strings", "escaped-quotes"],
)
def test_a_hostile_tool_result_is_scanned_in_linear_time(content: str) -> None:
    messages = [
        {"role": "user", "content": "q?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c", "content": content},
    ]
    with cpu_clock() as elapsed, contextlib.suppress(DocumentLimitError):
        parse_request({"model": "m", "messages": messages}, PROXY_LIMITS)
    assert elapsed() < BOUND_SECONDS


@pytest.mark.parametrize("role", ["system", "user"])
def test_thousands_of_messages_each_almost_a_candidate_are_scanned_in_linear_time(role: str) -> None:
    # Each message's JSON object was judged against a rescan of every later message: 40,000 took 31 s. Parsing
    # 40,000 messages is itself seconds of CPU (3.3-4.2 s on this project's machine on a slow day, 1-2 s on a
    # good one), so the test compares growth, not a fixed bound: four times the messages costs about four times
    # the CPU when the scan is linear, sixteen when it is quadratic.
    def cost(count: int) -> float:
        messages = [{"role": role, "content": '{"a": "x", "b": "y"}'}] * count + [{"role": "user", "content": "q"}]
        with cpu_clock() as elapsed:
            parse_request({"model": "m", "messages": messages}, PROXY_LIMITS)
        return elapsed()

    small, large = min(cost(10_000) for _ in range(2)), cost(40_000)
    assert large / small < 8, f"10,000 messages: {small:.2f} s, 40,000: {large:.2f} s"
    assert large < 4 * BOUND_SECONDS


def test_system_messages_of_a_marker_word_and_long_blanks_are_scanned_in_linear_time() -> None:
    messages = [{"role": "system", "content": "Source" + " " * 500_000}] * 2 + [{"role": "user", "content": "q"}]
    with cpu_clock() as elapsed:
        parse_request({"model": "m", "messages": messages}, PROXY_LIMITS)
    assert elapsed() < BOUND_SECONDS


def test_thousands_of_messages_are_scanned_in_linear_time() -> None:
    calls = [{"id": f"c{i}", "type": "function"} for i in range(20_000)]
    results = [{"role": "tool", "tool_call_id": f"c{i}", "content": "x"} for i in range(20_000)]
    systems = [{"role": "system", "content": "Document: x"}] * 20_000
    messages = [*systems, {"role": "user", "content": "q?"}, {"role": "assistant", "tool_calls": calls}, *results]
    with cpu_clock() as elapsed, contextlib.suppress(DocumentLimitError):
        parse_request({"model": "m", "messages": messages}, PROXY_LIMITS)
    assert elapsed() < BOUND_SECONDS


@pytest.mark.parametrize(
    "declared",
    [
        DeclaredFormat(name="a", start="<kb>", end="</kb>", separator="\n---\n"),
        DeclaredFormat(name="b", document_start="Doc {n}:"),
    ],
    ids=["separator", "document-start"],
)
def test_declared_formats_scan_in_linear_time(declared: DeclaredFormat) -> None:
    for text in (megabyte("Doc 1"), megabyte("<kb>"), megabyte("\n---", head="<kb>"), megabyte("Doc 123456789:")):
        with cpu_clock() as elapsed, contextlib.suppress(DocumentLimitError):
            parse_request(user(text), PROXY_LIMITS, declared=[declared])
        assert elapsed() < BOUND_SECONDS
