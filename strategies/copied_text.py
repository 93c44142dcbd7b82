"""Finding where a model's copied line came from: the fuzzy match behind `recite` and `fact`.

A small model does not copy exactly. It writes the document's header as the prompt showed it (`Document
[4](Title: T3) ...`), bullets, quotes and headings, drops or changes a word, starts in the middle of a sentence
and runs into the next. A line counts as copied from a document when most of its content words occur in that
document (its rendering, header included), and it then stands for the sentences of the document's own text it
covers: what the model changed never reaches the answer call, and text it invented matches nothing.

Linear in the request and the answer: the documents are tokenized once into an index from word to the
documents holding it, so that each line costs its own words times the documents they occur in (at most
`COMMON_POSTINGS`), plus a comparison with at most `MAX_CANDIDATES` documents or sentences of the document it
matched; an answer is read for `MAX_LINES` lines within `MAX_ANSWER_CHARS`.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

from contextlift.strategies.request import ChatRequest, Document

MIN_CONTAINMENT = 0.6
"""Share of a line's content words that must occur in a document for the line to count as copied from it: more
of the line copied than made up.

Measured on 36 recitations of the embedded SmolLM2-135M (litm-qa, 10 documents, easy and hard distractors, gold
first / middle / last; the recite prompt), as fallbacks / lines giving the gold document / lines giving another
document: 0.5: 3 / 27 / 6; 0.6: 5 / 24 / 7; 0.75: 11 / 20 / 5; 0.85: 18 / 17 / 1. The model paraphrases more
than it copies ("The Torristor engine was invented by Vathostsil" for "The inventor of the Torristor engine was
an engineer called Vathostsil"), and a located line passes on the document's own sentence, never the model's
words: 0.6 keeps most paraphrases and still drops a line that is half invented."""
MIN_SHARED_WORDS = 2
"""A line sharing fewer content words with a document than this is too short to tell where it came from."""
SENTENCE_COVERAGE = 0.5
"""A sentence of the matched document is taken when the line holds this share of its content words, or the
sentence holds this share of the line's: a line that spans sentences takes each, one that cuts a sentence
takes it whole."""

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# Function words carry no evidence of where a line came from: "the capital of" occurs everywhere.
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "there",
        "they",
        "this",
        "to",
        "was",
        "were",
        "which",
        "who",
        "with",
    }
)


def content_words(text: str) -> set[str]:
    """The distinct words of `text` that can tell documents apart (case folded, function words left out)."""
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOPWORDS}


@dataclass(frozen=True, slots=True)
class Located:
    """Where a line was found: the document and the sentences of its text that the line covers."""

    document: int
    sentences: tuple[int, ...]
    """Indices into the document's sentences; empty when the line only named the document (its header)."""
    containment: float


MAX_ANSWER_CHARS = 65_536
"""Of a recitation or retrieval answer, only this much is read: 4,096 tokens (the `max_tokens` cap of both) are
about 16,000 characters, and an upstream that answers with more must not cost the proxy more CPU."""
COMMON_POSTINGS = 64
"""A word found in more documents (or sentences of one document) than this is counted by looking it up in each
candidate, not by walking its postings: each line then costs its own words times at most this, whatever the
number of documents."""
MAX_LINES = 2_048
"""Of a recitation or retrieval answer, only this many non-blank lines are read: a non-blank line is a character
and its line break, two tokens at least, so 4,096 tokens (the `max_tokens` cap of both) hold no more. An upstream
that writes 65,536 characters of two-word lines (16,384 of `b c`) must not have each compared with the documents."""
MAX_CANDIDATES = 64
"""A line is compared whole (its words against theirs) with at most this many of the sentences that share a word
with it, or of the documents for its best containment: those sharing the most of its distinctive words first.
Comparing every candidate cost the line's words times the candidates, themselves up to `COMMON_POSTINGS` per
word: a 64 KB recitation of 400-word lines against sentences built to each share a different one of those words
took 2.5 s to locate. A real line covers the one to three sentences it copies: in the 36 measured recitations a line had
at most 3 candidate sentences (and 10 candidate documents), all compared, as before."""


@dataclass(slots=True)
class _Entry:
    words: set[str]
    """The document's content words, its rendering and title included."""
    sentences: list[str]
    sentence_words: list[set[str]]
    by_word: dict[str, list[int]]
    """The sentences each content word occurs in."""
    taken: set[int] = field(default_factory=set)


def lines_of(answer: str) -> list[str]:
    """The non-blank lines of a model's answer, the first `MAX_LINES` within `MAX_ANSWER_CHARS`."""
    return list(islice((line for line in answer[:MAX_ANSWER_CHARS].splitlines() if line.strip()), MAX_LINES))


class CopiedTextIndex:
    """The documents of a request, indexed for locating copied lines."""

    def __init__(self, request: ChatRequest, documents: Sequence[Document] | None = None) -> None:
        shown = request.with_documents(documents) if documents is not None else request
        self.documents = list(shown.documents)
        base = shown.block.numbering_base if shown.block and shown.block.numbering_base is not None else None
        self.numbering_base = 1 if base is None else base
        self.question_words = content_words(request.question)
        self._postings: dict[str, list[int]] = {}
        self._entries: list[_Entry] = []
        for position, document in enumerate(self.documents):
            number = None if base is None else base + position
            header = document.rendered(number, shown.block.format) if shown.block else document.raw
            words = content_words(f"{document.title or ''}\n{header}\n{document.text}")
            for word in words:
                self._postings.setdefault(word, []).append(position)
            sentences = [s for s in _SENTENCE_END.split(document.text) if s.strip()]
            sentence_words = [content_words(s) for s in sentences]
            by_word: dict[str, list[int]] = {}
            for index, found in enumerate(sentence_words):
                for word in found:
                    by_word.setdefault(word, []).append(index)
            self._entries.append(_Entry(words, sentences, sentence_words, by_word))

    def locate(self, line: str, claimed: int | None = None) -> Located | None:
        """Where `line` was copied from, preferring the `claimed` document (an index) when it holds the line.

        None when the line is too short to place, only repeats the question, or is not in any document.
        """
        words = content_words(line)
        if len(words) < MIN_SHARED_WORDS or words <= self.question_words:
            return None
        counts = self._shared_counts(words)
        if not counts:
            return None
        best = max(counts, key=lambda p: (counts[p], p == claimed, -p))
        if claimed is not None and self._shared(claimed, words) / len(words) >= MIN_CONTAINMENT:
            best = claimed
        shared = self._shared(best, words)
        containment = shared / len(words)
        if shared < MIN_SHARED_WORDS or containment < MIN_CONTAINMENT:
            return None
        return Located(best, self._covered(best, words), containment)

    def locate_all(self, line: str, claimed: int | None = None) -> list[Located]:
        """`locate` for the whole line, else for each of its sentences: a small model copies a sentence and
        runs on with words of its own, which sink the whole line's containment but not the copied sentence's."""
        whole = self.locate(line, claimed)
        if whole is not None:
            return [whole]
        pieces = [p for p in _SENTENCE_END.split(line) if p.strip()]
        if len(pieces) < 2:
            return []
        return [found for piece in pieces if (found := self.locate(piece, claimed)) is not None]

    def best_containment(self, line: str) -> float:
        """The highest share of the line's content words found in one document (for reporting a miss)."""
        words = content_words(line)
        counts = self._shared_counts(words)
        if not words or not counts:
            return 0.0
        return max(self._shared(p, words) for p in _most(counts)) / len(words)

    def _shared_counts(self, words: set[str]) -> dict[int, int]:
        """For each document sharing a distinctive word with the line, how many of those it shares (common
        words are left to `_shared`)."""
        counts: dict[int, int] = {}
        for word in words:
            positions = self._postings.get(word, ())
            if len(positions) > COMMON_POSTINGS:
                continue
            for position in positions:
                counts[position] = counts.get(position, 0) + 1
        if not counts and any(w in self._postings for w in words):
            # Only common words: the documents that hold the first of them are the candidates, bounded.
            common = next(w for w in words if w in self._postings)
            counts = dict.fromkeys(self._postings[common][:COMMON_POSTINGS], 1)
        return counts

    def _shared(self, position: int, words: set[str]) -> int:
        return len(words & self._entries[position].words)

    def _covered(self, position: int, words: set[str]) -> tuple[int, ...]:
        entry = self._entries[position]
        postings = [entry.by_word.get(word, [])[:COMMON_POSTINGS] for word in words]
        candidates: set[int] = set().union(*postings)
        if len(candidates) > MAX_CANDIDATES:
            # Counted only past the cap: a set is built faster than a count, and a real line never gets here.
            candidates = set(_most(Counter(index for found in postings for index in found)))
        covered = []
        for index in sorted(candidates):
            sentence_words = entry.sentence_words[index]
            shared = len(words & sentence_words)
            # A short sentence the line runs into shares few words with it, but most of its own.
            most_of_sentence = shared > 0 and shared >= SENTENCE_COVERAGE * len(sentence_words)
            most_of_line = shared >= MIN_SHARED_WORDS and shared >= SENTENCE_COVERAGE * len(words)
            if most_of_sentence or most_of_line:
                covered.append(index)
        return tuple(covered)

    def sentence_text(self, position: int, sentences: Sequence[int]) -> str:
        """The document's own text of these sentences, in the document's order."""
        entry = self._entries[position]
        return " ".join(entry.sentences[i].strip() for i in sorted(sentences))

    def take(self, position: int, sentences: Sequence[int]) -> tuple[int, ...]:
        """Mark sentences as used (a fact found); returns those not taken before."""
        entry = self._entries[position]
        new = tuple(i for i in sentences if i not in entry.taken)
        entry.taken.update(new)
        return new

    def remaining(self) -> list[Document]:
        """The documents without the sentences taken so far; one with nothing left has empty text."""
        left = []
        for document, entry in zip(self.documents, self._entries, strict=True):
            if not entry.taken:
                left.append(document)
                continue
            kept = [s.strip() for i, s in enumerate(entry.sentences) if i not in entry.taken]
            left.append(document.derived(" ".join(kept)))
        return left


def _most(hits: dict[int, int]) -> list[int]:
    """The `MAX_CANDIDATES` keys of `hits` with the highest counts, the earliest first among equals; all of them
    when there are no more."""
    if len(hits) <= MAX_CANDIDATES:
        return list(hits)
    return heapq.nsmallest(MAX_CANDIDATES, hits, key=lambda key: (-hits[key], key))
