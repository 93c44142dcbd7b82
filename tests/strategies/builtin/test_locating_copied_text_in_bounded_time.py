"""Locating a model's copied lines (`recite`, `fact`) compared each line with every sentence sharing one of its
words, up to 64 per word: 64 KB of 400-word lines against sentences that each share a different word of the line
took 3.8 s. Now a line is compared with at most `MAX_CANDIDATES` sentences or documents, those sharing most of its
distinctive words, and an answer is read for at most `MAX_LINES` non-blank lines."""

from __future__ import annotations

import pytest

from contextlift.strategies import ChatRequest, Document, DocumentBlock, DocumentFormat
from contextlift.strategies.builtin.fact import _Remaining
from contextlift.strategies.builtin.recite import recited_evidence
from contextlift.strategies.copied_text import MAX_ANSWER_CHARS, MAX_CANDIDATES, MAX_LINES, CopiedTextIndex, lines_of
from tests.cpu_time import cpu_clock

LINE_WORDS = [f"word{i}" for i in range(200)]


def request_of(texts: list[str]) -> ChatRequest:
    block = DocumentBlock(DocumentFormat.LITM, 0, None, "Answer from these.\n\n", ("\n",), "\n\nQuestion: q?", 1)
    documents = tuple(Document(text, title=f"T{i}") for i, text in enumerate(texts))
    return ChatRequest({"model": "m", "messages": [{"role": "user", "content": ""}]}, documents, block, "q?")


def answer_of(line: str) -> str:
    return (line * (MAX_ANSWER_CHARS // len(line) + 1))[:MAX_ANSWER_CHARS]


@pytest.fixture(scope="module")
def sentences_each_sharing_another_word() -> ChatRequest:
    # Word i of the line opens 64 sentences of its own, each holding 59 more of the line's words: every word's
    # postings lead to 64 sentences no other word leads to, some 9,000 candidates for each line.
    sentences = [
        " ".join(LINE_WORDS[(i + j) % len(LINE_WORDS)] for j in range(60)) + "."
        for i in range(len(LINE_WORDS))
        for _ in range(64)
    ]
    return request_of([" ".join(sentences)])


def test_lines_sharing_words_with_thousands_of_sentences_are_located_in_bounded_time(
    sentences_each_sharing_another_word: ChatRequest,
) -> None:
    index = CopiedTextIndex(sentences_each_sharing_another_word)
    lines = lines_of(answer_of(" ".join(LINE_WORDS) + "\n"))
    with cpu_clock() as elapsed:
        located = [index.locate_all(line) for line in lines]
    # 2 to 2.5 s before (each line compared with some 9,000 sentences of 60 words), about 0.17 s now.
    assert elapsed() < 1.0
    assert all(len(found) == 1 and len(found[0].sentences) == MAX_CANDIDATES for found in located)


def test_a_retrieval_answer_against_them_is_read_in_bounded_time(
    sentences_each_sharing_another_word: ChatRequest,
) -> None:
    remaining = _Remaining(list(sentences_each_sharing_another_word.documents))
    assert remaining.retrieval_body(sentences_each_sharing_another_word, 64) is not None
    with cpu_clock() as elapsed:
        facts = remaining.take_facts(answer_of("- " + " ".join(LINE_WORDS) + "\n"))
    assert elapsed() < 1.0
    assert facts


def test_the_sentence_a_line_copies_is_found_among_thousands_sharing_one_word_with_it() -> None:
    # 5,000 short sentences each share one word of the line, and each is half made of it: without a cap every
    # one would be compared, and covered. The copied sentence shares every word and comes first.
    line = "The Torristor engine was invented by Vathostsil in Quellmoor"
    noise = [f"{word} filler{i}." for i in range(1_000) for word in ("Torristor", "engine", "invented", "Vathostsil")]
    copied = "The Torristor engine was invented by Vathostsil in Quellmoor."
    request = request_of([" ".join([copied, *noise])])
    index = CopiedTextIndex(request)
    found = index.locate(line)
    assert found is not None
    assert 0 in found.sentences
    assert len(found.sentences) <= MAX_CANDIDATES
    evidence = recited_evidence(line, request).evidence
    assert evidence[0].text.startswith(copied)


def test_best_containment_compares_at_most_max_candidates_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2,000 documents, each word of the line in 64 of them: a line that places nowhere (half its words invented)
    # had its words compared with each of the 2,000 to report how close it came.
    documents: list[list[str]] = [[] for _ in range(2_000)]
    for j, word in enumerate(LINE_WORDS):
        for k in range(64):
            documents[(j * 64 + k) % len(documents)].append(word)
    index = CopiedTextIndex(request_of([" ".join(words) + "." for words in documents]))
    compared = 0
    shared = CopiedTextIndex._shared

    def counted(self: CopiedTextIndex, position: int, words: set[str]) -> int:
        nonlocal compared
        compared += 1
        return shared(self, position, words)

    monkeypatch.setattr(CopiedTextIndex, "_shared", counted)
    line = " ".join(LINE_WORDS) + " " + " ".join(f"invented{i}" for i in range(400))
    assert index.locate_all(line) == []
    compared = 0
    assert 0 < index.best_containment(line) < 0.6
    assert compared <= MAX_CANDIDATES


def test_an_answer_is_read_for_at_most_max_lines_non_blank_lines() -> None:
    assert len(lines_of("b c\n" * 20_000)) == MAX_LINES
    # Blank lines do not count: 4,096 tokens of them are no evidence, and cost nothing to skip.
    assert lines_of("\n \n" * 10_000 + "a b") == ["a b"]
    assert lines_of("one two\n\nthree four\n") == ["one two", "three four"]
