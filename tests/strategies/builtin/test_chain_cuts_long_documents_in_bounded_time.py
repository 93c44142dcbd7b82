"""`chain` on a document of megabytes without whitespace: tiktoken counted it whole four times (27 s of CPU for
8 MB of "x", 40 s for 8 MB of full stops), and every chunk was cut before the cap on chunks was read. Now a long
text is counted a window at a time and only as far as the budget needs, and cutting stops two chunks past the cap."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.strategies import (
    ChatRequest,
    Document,
    DocumentBlock,
    DocumentFormat,
    Services,
    build_registry,
    parse_request,
    parse_selection,
    run_pipeline,
)
from contextlift.strategies.builtin.chain import chunk_documents
from contextlift.strategies.tokens import TiktokenTokenizer
from tests.cpu_time import cpu_clock
from tests.strategies.scripted import ScriptedUpstream

MB = 1_000_000


class CountedChars:
    """A fake tokenizer, one token per character, that adds up how many characters it was given to count."""

    def __init__(self) -> None:
        self.counted = 0

    def count(self, text: str) -> int:
        self.counted += len(text)
        return len(text)


def one_document(text: str, fmt: DocumentFormat) -> ChatRequest:
    numbered = fmt is DocumentFormat.LITM
    block = DocumentBlock(fmt, 0, None, "Answer from this.\n\n", ("\n",), "\n\nQuestion: q?", 1 if numbered else None)
    document = Document(text, title="T" if numbered else None)
    return ChatRequest({"model": "m", "messages": [{"role": "user", "content": ""}]}, (document,), block, "q?")


@pytest.mark.parametrize("fmt", [DocumentFormat.LITM, DocumentFormat.XML])
@pytest.mark.parametrize(
    "text",
    ["x" * (8 * MB), ("ab1" * (3 * MB))[: 8 * MB], "字" * (3 * MB), "x" * (8 * MB) + " tail. End."],
    ids=["one-letter", "letters-and-digits", "cjk", "one-word-then-a-sentence"],
)
def test_eight_megabytes_without_whitespace_are_chunked_in_well_under_a_second(text: str, fmt: DocumentFormat) -> None:
    tokenizer = TiktokenTokenizer()
    tokenizer.count("warm-up")
    with cpu_clock() as elapsed:
        chunks = chunk_documents(one_document(text, fmt), 4096, tokenizer, limit=18)
    # 27 s for "x" before; about 0.2 s now on a loaded machine.
    assert elapsed() < 1.0
    assert len(chunks) == 18
    assert all(tokenizer.count(c.documents[0].text) <= 4096 for c in chunks)
    assert text.startswith("".join(c.documents[0].text for c in chunks))


def test_full_stops_without_whitespace_are_chunked_in_bounded_time() -> None:
    # The worst shape found for tiktoken (64 full stops a token, 1.1 µs a character counted whole): 40 s before,
    # under 1 s now, most of it counting the 4.7 MB that 18 chunks of 4,096 such tokens hold.
    tokenizer = TiktokenTokenizer()
    tokenizer.count("warm-up")
    with cpu_clock() as elapsed:
        chunks = chunk_documents(one_document("." * (8 * MB), DocumentFormat.LITM), 4096, tokenizer, limit=18)
    assert elapsed() < 3.0
    assert len(chunks) == 18


def test_a_long_document_is_counted_only_as_far_as_the_chunks_asked_for() -> None:
    tokenizer = CountedChars()
    chunks = chunk_documents(one_document("x" * (8 * MB), DocumentFormat.LITM), 4096, tokenizer, limit=18)
    assert len(chunks) == 18
    # 18 chunks of ~4,090 characters, and the first window (65,536) of the document, of its one sentence and of its
    # one word: 270,945 characters, where 4 x 8 MB and the 8 MB of every chunk were counted before.
    assert tokenizer.counted < 300_000


def test_without_a_limit_every_chunk_is_cut_and_a_long_document_counted_once() -> None:
    tokenizer = CountedChars()
    text = "x" * (2 * MB)
    chunks = chunk_documents(one_document(text, DocumentFormat.XML), 4096, tokenizer)
    assert "".join(c.documents[0].text for c in chunks) == text
    assert all(len(c.documents[0].text) <= 4096 for c in chunks)
    assert tokenizer.counted < 1.1 * len(text)


async def test_chain_refuses_eight_megabytes_after_cutting_two_chunks_past_the_cap() -> None:
    text = "x" * (8 * MB)
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": f"Answer from this.\n\n<document>{text}</document>\n\nWhat is it?"}],
    }
    request = parse_request(body)
    assert [len(d.text) for d in request.documents] == [len(text)]
    tokenizer = CountedChars()
    upstream = ScriptedUpstream("answer")
    pipeline = build_registry().resolve(parse_selection("chain"), {})
    result = await run_pipeline(pipeline, request, upstream, Services(tokenizer=tokenizer))
    assert result.applied == "chain; chunks>17; fallback=too-many-chunks"
    assert len(upstream.bodies) == 1
    assert tokenizer.counted < 300_000
