"""Documents as retrieved chunks: the `chunks` option of the prompt-shaped tasks.

A retriever returns chunks, not single passages: every text splitter keeps the paragraphs of an article together
up to its chunk size, blank lines between them. With `--option litm-qa.chunks=paragraphs` each document of a case
becomes the chunk that LangChain's `RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=0)` cuts first
from an article made of the document's passage followed by real paragraphs (SQuAD 2.0 dev, from `--data`) that hold
none of the case's answers: the passage and the paragraphs after it that fit, joined by a blank line.
`tests/eval/tasks/test_chunks_as_splitters_cut_them.py` cuts the same articles with LangChain's own splitter and
compares. The splitter is a test-only dependency, never imported here.

The paragraphs a document gets depend on the seed and the passage alone, so a document is the same chunk at
every gold position, in every shape and every pipeline of a run.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contextlift.eval.cases import case_rng
from contextlift.eval.metrics import normalize_answer
from contextlift.eval.tasks.litm import Passage
from contextlift.eval.tasks.registry import Option
from contextlift.eval.tasks.squad import load_squad

CHUNK_CHARACTERS = 1000
"""The chunk size of LangChain's RAG tutorials (`chunk_size=1000`): two or three paragraphs of most articles."""
FOLLOWING = 3
"""Paragraphs drawn to follow each passage: more than a chunk of 1,000 characters takes after a passage."""
MODES = ("passage", "paragraphs")


def chunk_mode(text: str) -> str:
    """The `chunks` option's value.

    Raises:
        ValueError: an unknown value.
    """
    if text not in MODES:
        raise ValueError(f"unknown chunks {text!r}; choose {', '.join(MODES)}")
    return text


CHUNKS = Option("chunks", "passage", chunk_mode)
"""`--option litm-qa.chunks=paragraphs`: each document a multi-paragraph chunk (`passage`: the passage alone)."""


def first_chunk(paragraphs: Sequence[str], size: int = CHUNK_CHARACTERS) -> str:
    """The first chunk `RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=0)` cuts from `paragraphs`
    joined by blank lines, where the first paragraph is within `size`: whole paragraphs, as many as fit with the
    blank lines between them (its `_merge_splits` over the "\\n\\n" splits)."""
    chunk = [paragraphs[0]]
    total = len(paragraphs[0])
    for paragraph in paragraphs[1:]:
        if total + 2 + len(paragraph) > size:
            break
        chunk.append(paragraph)
        total += 2 + len(paragraph)
    return "\n\n".join(chunk)


@dataclass(frozen=True, slots=True)
class Chunker:
    """Turns a case's passages into chunks: each passage followed by the real paragraphs its seed draws."""

    seed: int
    pool: tuple[str, ...]

    def chunked(self, documents: Sequence[Passage], answers: Sequence[str]) -> list[Passage]:
        """The documents as chunks; no paragraph added holds one of `answers` (normalised as the metric does)."""
        wanted = [normalize_answer(a) for a in answers]
        return [Passage(d.title, self._chunk(d.text, tuple(wanted))) for d in documents]

    def _chunk(self, passage: str, answers: tuple[str, ...]) -> str:
        return first_chunk([passage, *self.following(passage, answers)])

    def following(self, passage: str, answers: Sequence[str] = ()) -> list[str]:
        """The paragraphs drawn to follow `passage` in its article (the chunk keeps those that fit); none holds one
        of the normalised `answers`."""
        rng = case_rng(self.seed, "chunks", passage)
        following: list[str] = []
        for _ in range(64):  # a few draws hold an answer or the passage itself; bounded all the same
            if len(following) == FOLLOWING:
                break
            paragraph = self.pool[rng.randrange(len(self.pool))]
            text = normalize_answer(paragraph)
            if paragraph != passage and paragraph not in following and not any(a and a in text for a in answers):
                following.append(paragraph)
        return following


def chunker(seed: int, squad: Path | None) -> Chunker:
    """The chunker of a run.

    Raises:
        ValueError: no SQuAD file to draw the paragraphs from.
    """
    if squad is None:
        raise ValueError(
            "chunks=paragraphs draws real paragraphs from SQuAD 2.0's dev file (squad-v2.0-dev.json); "
            "give the folder that holds it with --data"
        )
    return Chunker(seed, _pool(squad))


@functools.cache
def _pool(squad: Path) -> tuple[str, ...]:
    """SQuAD's paragraphs short enough to follow a passage inside one chunk."""
    return tuple(p.text for a in load_squad(squad) for p in a.paragraphs if len(p.text) <= CHUNK_CHARACTERS // 2)
