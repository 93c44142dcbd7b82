"""Finding where a model's copied line came from: the fuzzy match behind `recite` and `fact`.

A small model does not copy exactly. It writes the document's header as the prompt showed it (`Document
[4](Title: T3) ...`), bullets, quotes and headings, drops or changes a word, starts in the middle of a sentence
and runs into the next. A line counts as copied from a document when most of its content words occur in that
document (its rendering, header included), and it then stands for the sentences of the document's own text it
covers: what the model changed never reaches the answer call, and text it invented matches nothing.

Linear in the request and the answer: the documents are tokenized once into an index from word to the
documents holding it, so that each line costs its own words times the documents they occur in, plus one pass
over the sentences of the document it matched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from strategies.request import ChatRequest, Document

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


@dataclass(slots=True)
class _Entry:
    sentences: list[str]
    words: list[set[str]]
    taken: set[int] = field(default_factory=set)


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
            self._entries.append(_Entry(sentences, [content_words(s) for s in sentences]))

    def locate(self, line: str, claimed: int | None = None) -> Located | None:
        """Where `line` was copied from, preferring the `claimed` document (an index) when it holds the line.

        None when the line is too short to place, only repeats the question, or is not in any document.
        """
        words = content_words(line)
        if len(words) < MIN_SHARED_WORDS or words <= self.question_words:
            return None
        counts: dict[int, int] = {}
        for word in words:
            for position in self._postings.get(word, ()):
                counts[position] = counts.get(position, 0) + 1
        if not counts:
            return None
        best = max(counts, key=lambda p: (counts[p], p == claimed, -p))
        if claimed is not None and counts.get(claimed, 0) / len(words) >= MIN_CONTAINMENT:
            best = claimed
        shared = counts[best]
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
        if not words:
            return 0.0
        counts: dict[int, int] = {}
        for word in words:
            for position in self._postings.get(word, ()):
                counts[position] = counts.get(position, 0) + 1
        return max(counts.values(), default=0) / len(words)

    def _covered(self, position: int, words: set[str]) -> tuple[int, ...]:
        entry = self._entries[position]
        covered = []
        for index, sentence_words in enumerate(entry.words):
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
