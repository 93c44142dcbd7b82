"""`chain`: documents cut into chunks within a token budget, in order; workers called one after the other, each
given the summary the one before wrote; a manager call answers the client's request from the last summary."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextlift.strategies import (
    ChatRequest,
    Completion,
    Document,
    DocumentBlock,
    DocumentFormat,
    Services,
    StrategySelectionError,
    build_registry,
    parse_request,
    parse_selection,
    run_pipeline,
)
from contextlift.strategies.builtin.chain import Chunk, chunk_documents, split_text
from contextlift.strategies.builtin.prompts import CHAIN_MANAGER_PROMPT, CHAIN_WORKER_PROMPT
from contextlift.strategies.spans import render_litm_line
from tests.cpu_time import cpu_clock
from tests.fakes import chunk
from tests.strategies.scripted import ScriptedUpstream


class WordCount:
    """A fake tokenizer: one token per whitespace-separated word, so that budgets are easy to reckon."""

    def count(self, text: str) -> int:
        return len(text.split())


def words(text: str) -> int:
    return len(text.split())


INSTRUCTION = "Write a high-quality answer for the given question using only the provided search results."
QUESTION = "what is the capital of Zorvath?"
# Seven documents of 20 words each as written (`Document [i](Title: t)` is 3): three fit in 64 tokens, four do not.
DOCS = [(f"Place{i}", f"Place{i} lies on the river {i} and trades in wool and copper with towns on its banks.")
        for i in range(1, 8)]  # fmt: skip
LINES = [f"Document [{i}](Title: {t}) {x}" for i, (t, x) in enumerate(DOCS, 1)]
PROMPT = f"{INSTRUCTION}\n\n" + "\n".join(LINES) + f"\n\nQuestion: {QUESTION}\nAnswer:"
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}],
    "max_tokens": 20,
    "temperature": 0.0,
}


async def run(selection: str, upstream: ScriptedUpstream, body: dict[str, Any] = BODY) -> tuple[Any, str]:
    pipeline = build_registry().resolve(parse_selection(selection), {})
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services(tokenizer=WordCount()))
    return result.outcome, result.applied


def worker_prompt(documents: list[str], notes: str) -> str:
    return CHAIN_WORKER_PROMPT.format(documents="\n".join(documents), notes=notes, question=QUESTION)


def manager_prompt(notes: str) -> str:
    summary = render_litm_line(1, CHAIN_MANAGER_PROMPT.format(notes=notes), None)
    return f"{INSTRUCTION}\n\n{summary}\n\nQuestion: {QUESTION}\nAnswer:"


def documents_in(prompt: str) -> str:
    """The documents a worker prompt shows (they come first, before its summary line)."""
    return prompt.split("\n\nHere is the summary of the previous source text:")[0]


def test_the_example_request_has_seven_documents_of_twenty_tokens() -> None:
    request = parse_request(BODY)
    assert len(request.documents) == 7
    assert [words(line) for line in LINES] == [20] * 7


async def test_each_worker_gets_the_summary_the_one_before_wrote_and_the_manager_the_last() -> None:
    upstream = ScriptedUpstream("summary one", "summary two", "summary three", "Quellmoor")
    outcome, applied = await run("chain; chunk_tokens=64", upstream)
    assert applied == "chain; chunk_tokens=64; chunks=3"
    assert len(upstream.bodies) == 4
    assert upstream.streamed == []
    for body, documents, notes in zip(
        upstream.bodies, [LINES[0:3], LINES[3:6], LINES[6:7]], ["", "summary one", "summary two"], strict=False
    ):
        assert body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": worker_prompt(documents, notes)},
        ]
        assert body["max_tokens"] == 512
        assert body["temperature"] == 0.0
    manager = upstream.bodies[3]
    assert manager["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": manager_prompt("summary three")},
    ]
    assert manager["max_tokens"] == 20
    assert isinstance(outcome, Completion)
    assert outcome.body["choices"][0]["message"]["content"] == "Quellmoor"
    assert outcome.body["usage"] == {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}


async def test_every_worker_reads_at_most_chunk_tokens_of_documents() -> None:
    upstream = ScriptedUpstream()
    _, applied = await run("chain; chunk_tokens=100", upstream)
    assert applied == "chain; chunk_tokens=100; chunks=2"
    shown = [documents_in(p) for p in upstream.prompts[:-1]]
    assert [words(s) for s in shown] == [100, 40]
    assert "\n".join(shown) == "\n".join(LINES)


async def test_an_empty_summary_passes_on_the_one_before_it() -> None:
    upstream = ScriptedUpstream("summary one", "  \n", "", "Quellmoor")
    _, applied = await run("chain; chunk_tokens=64", upstream)
    assert applied == "chain; chunk_tokens=64; chunks=3; empty=2"
    assert upstream.prompts[1] == worker_prompt(LINES[3:6], "summary one")
    assert upstream.prompts[2] == worker_prompt(LINES[6:7], "summary one")
    assert upstream.prompts[3] == manager_prompt("summary one")


async def test_no_summary_at_all_answers_the_original_request() -> None:
    upstream = ScriptedUpstream("", " ", "\n", "answer")
    outcome, applied = await run("chain; chunk_tokens=64", upstream)
    assert applied == "chain; chunk_tokens=64; chunks=3; empty=3; fallback=empty-notes"
    assert upstream.bodies[3] == BODY
    assert outcome.body["usage"]["total_tokens"] == 4 * 12


async def test_documents_needing_more_chunks_than_max_chunks_get_one_plain_call() -> None:
    upstream = ScriptedUpstream("answer")
    _, applied = await run("chain; chunk_tokens=64; max_chunks=2", upstream)
    assert applied == "chain; chunk_tokens=64; max_chunks=2; chunks=3; fallback=too-many-chunks"
    assert upstream.bodies == [BODY]


async def test_max_chunks_workers_are_enough_when_the_documents_need_that_many() -> None:
    upstream = ScriptedUpstream()
    _, applied = await run("chain; chunk_tokens=64; max_chunks=3", upstream)
    assert applied == "chain; chunk_tokens=64; max_chunks=3; chunks=3"
    assert len(upstream.bodies) == 4


def test_calls_planned_are_max_chunks_workers_and_the_manager() -> None:
    registry = build_registry()
    assert registry.resolve(parse_selection("chain"), {}).max_upstream_calls() == 17
    assert registry.resolve(parse_selection("chain; max_chunks=5"), {}).max_upstream_calls() == 6
    assert registry.get("chain").answers_n is False
    with pytest.raises(StrategySelectionError, match="max_chunks must be at most 25"):
        registry.resolve(parse_selection("chain; max_chunks=26"), {})
    with pytest.raises(StrategySelectionError, match="chunk_tokens must be at least 64"):
        registry.resolve(parse_selection("chain; chunk_tokens=10"), {})


async def test_a_document_over_the_budget_is_read_in_pieces_of_its_own() -> None:
    sentences = [f"Sentence {n} of the long one tells us more about the city." for n in range(15)]
    long_text = " ".join(sentences)  # 15 sentences of 12 words
    docs = [("Short", DOCS[0][1]), ("Long", long_text), ("Tail", DOCS[1][1])]
    lines = [f"Document [{i}](Title: {t}) {x}" for i, (t, x) in enumerate(docs, 1)]
    body = {**BODY, "messages": [{"role": "user", "content": PROMPT.replace("\n".join(LINES), "\n".join(lines))}]}
    upstream = ScriptedUpstream()
    _, applied = await run("chain; chunk_tokens=64", upstream, body)
    # The long one: 64 - 3 for its number and title leaves 61, five sentences (60) a piece.
    assert applied == "chain; chunk_tokens=64; chunks=5"
    shown = [documents_in(p) for p in upstream.prompts[:-1]]
    assert shown[0] == lines[0]
    assert shown[4] == lines[2]
    pieces = shown[1:4]
    assert all(p.startswith("Document [2](Title: Long) ") for p in pieces)
    assert [words(p) for p in pieces] == [63, 63, 63]
    assert " ".join(p.removeprefix("Document [2](Title: Long) ").strip() for p in pieces) == long_text


async def test_cancelling_during_a_worker_call_makes_no_further_call() -> None:
    upstream = ScriptedUpstream("summary one", "hang", "summary three", "answer")
    task = asyncio.ensure_future(run("chain; chunk_tokens=64", upstream))
    for _ in range(500):
        if len(upstream.bodies) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(upstream.bodies) == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert upstream.cancelled == 1
    assert len(upstream.bodies) == 2
    assert upstream.streamed == []


async def test_only_the_manager_call_streams_and_its_usage_counts_the_workers() -> None:
    usage_chunk = chunk(usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})
    upstream = ScriptedUpstream("summary one", "summary two", "summary three", stream_events=[chunk("Q"), usage_chunk])
    body = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
    outcome, applied = await run("chain; chunk_tokens=64", upstream, body)
    assert applied == "chain; chunk_tokens=64; chunks=3"
    assert len(upstream.bodies) == 3
    assert all("stream" not in b and "stream_options" not in b for b in upstream.bodies)
    assert len(upstream.streamed) == 1
    manager = upstream.streamed[0]
    assert manager["stream"] is True
    assert manager["stream_options"] == {"include_usage": True}
    assert manager["messages"][-1]["content"] == manager_prompt("summary three")
    events = [e async for e in outcome.events()]
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "Q"
    assert json.loads(events[-1])["usage"] == {"prompt_tokens": 35, "completion_tokens": 7, "total_tokens": 42}


def test_sentences_that_fit_are_cut_only_at_their_ends() -> None:
    text = "One two three. Four five six! Seven eight."
    assert split_text(text, 6, words) == ["One two three. Four five six! ", "Seven eight."]


def test_a_sentence_over_the_budget_is_cut_between_words() -> None:
    assert split_text("a b c d e f g.\nh i", 3, words) == ["a b c ", "d e f ", "g.\nh i"]


def test_a_word_over_the_budget_is_cut_inside_it() -> None:
    # One token per character: a slice of budget // 4 characters is within the budget whatever the tokenizer.
    assert split_text("  abcdefghij", 8, len) == ["  abcdef", "ghij"]


sentence = st.lists(st.text("abcxyz", min_size=1, max_size=9), min_size=1, max_size=8).map(" ".join)
ends = st.sampled_from([". ", "! ", '." ', ".\n", "\n\n", " ", "", "?"])
texts = st.lists(st.tuples(sentence, ends), max_size=12).map(lambda pairs: "".join(s + e for s, e in pairs))


@settings(max_examples=200, deadline=None)
@given(text=st.tuples(st.sampled_from(["", " ", "\n "]), texts).map("".join), budget=st.integers(1, 30),
       counter=st.sampled_from([words, len]))  # fmt: skip
def test_pieces_join_to_the_text_and_fit_the_budget(text: str, budget: int, counter: Any) -> None:
    pieces = split_text(text, budget, counter)
    assert "".join(pieces) == text
    assert all(piece and counter(piece) <= budget for piece in pieces)


def built_request(texts: list[str], fmt: DocumentFormat) -> ChatRequest:
    numbered = fmt is DocumentFormat.LITM
    block = DocumentBlock(fmt, 0, None, "Answer from these.\n\n", ("\n",), "\n\nQuestion: q?", 1 if numbered else None)
    documents = tuple(Document(text, title=f"T{i}" if numbered else None) for i, text in enumerate(texts))
    return ChatRequest({"model": "m", "messages": [{"role": "user", "content": ""}]}, documents, block, "q?")


def shown_tokens(request: ChatRequest, chunk: Chunk) -> int:
    return words(request.with_documents(chunk.documents).documents_text())


@settings(max_examples=200, deadline=None)
@given(doc_texts=st.lists(texts.filter(str.strip), min_size=1, max_size=10), budget=st.integers(4, 40),
       fmt=st.sampled_from([DocumentFormat.LITM, DocumentFormat.XML]))  # fmt: skip
def test_chunks_hold_every_document_once_in_order_within_the_budget(
    doc_texts: list[str], budget: int, fmt: DocumentFormat
) -> None:
    request = built_request(doc_texts, fmt)
    chunks = chunk_documents(request, budget, WordCount())
    assert all(shown_tokens(request, c) <= budget for c in chunks)
    # In order, and each document's text once: whole in one chunk, or in pieces that join to it.
    placed = [(c.start + j, d.text) for c in chunks for j, d in enumerate(c.documents)]
    assert [i for i, _ in placed] == sorted(i for i, _ in placed)
    joined: dict[int, str] = {}
    for index, text in placed:
        joined[index] = joined.get(index, "") + text
    assert joined == dict(enumerate(doc_texts))
    split = {index for index, text in placed if text != doc_texts[index]}
    for index in range(len(doc_texts)):
        holding = [c for c in chunks if c.start <= index < c.start + len(c.documents)]
        if index in split:
            assert all(len(c.documents) == 1 for c in holding)
        else:
            assert len(holding) == 1
    # Greedy: a chunk of whole documents took the next whole one too if it fitted.
    for first, second in itertools.pairwise(chunks):
        if first.start not in split and second.start not in split:
            together = Chunk(first.start, (*first.documents, second.documents[0]))
            assert shown_tokens(request, together) > budget


MB = 1_000_000


@pytest.mark.parametrize(
    "text",
    ["a" * MB, ". " * (MB // 2), "." * MB, ".)" * (MB // 2), " " * MB, "\n" * MB, "ab " * (MB // 3)],
    ids=["one-word", "sentence-ends", "dots", "dots-and-closers", "spaces", "line-breaks", "words"],
)
def test_cutting_a_megabyte_takes_linear_time(text: str) -> None:
    with cpu_clock() as elapsed:
        pieces = split_text(text, 64, len)
    assert elapsed() < 3.0
    assert "".join(pieces) == text
