"""Lost in the Middle's data and prompts: multi-document QA (NQ-Open) and key-value retrieval, read from the
paper's own files, rendered exactly as the paper renders them, with the gold placed where asked."""

from __future__ import annotations

import functools
import gzip
import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextlift.eval.metrics import normalize_answer

QA_INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)
KV_INSTRUCTION = "Extract the value corresponding to the specified key in the JSON object below."


@dataclass(frozen=True, slots=True)
class Passage:
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class QAExample:
    question: str
    answers: tuple[str, ...]
    gold: Passage
    distractors: tuple[Passage, ...] = ()
    """From the paper's positional files; empty for the oracle file, whose distractors are drawn elsewhere."""


@dataclass(frozen=True, slots=True)
class KVExample:
    records: tuple[tuple[str, str], ...]
    key: str
    value: str


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_qa(path: Path) -> list[QAExample]:
    """The oracle file (one gold ctx each) or a positional file (`nq-open-N_total_documents_gold_at_i`)."""
    examples = []
    for row in _jsonl(path):
        ctxs = row["ctxs"]
        gold = next((c for c in ctxs if c.get("isgold")), ctxs[0])
        distractors = tuple(Passage(c["title"], c["text"]) for c in ctxs if c is not gold)
        examples.append(
            QAExample(row["question"], tuple(row["answers"]), Passage(gold["title"], gold["text"]), distractors)
        )
    return examples


def distractors_from_other_questions(
    example: QAExample, pool: Sequence[QAExample], count: int, rng: random.Random
) -> list[Passage]:
    """For the oracle file alone: other questions' gold passages that contain none of this one's answers."""
    answers = [normalize_answer(a) for a in example.answers]
    candidates = [
        other.gold
        for other, text in zip(pool, _normalised_golds(tuple(pool)), strict=True)
        if other.gold != example.gold and not any(a and a in text for a in answers)
    ]
    return rng.sample(candidates, count)


@functools.lru_cache(maxsize=4)
def _normalised_golds(pool: tuple[QAExample, ...]) -> tuple[str, ...]:
    # Once per pool, not once per question: normalising the oracle file's 2,655 passages takes a quarter second.
    return tuple(normalize_answer(example.gold.text) for example in pool)


def place(gold: Passage, distractors: Sequence[Passage], position: int) -> list[Passage]:
    """The documents with the gold at `position` (0-based) among the distractors, in their order."""
    documents = list(distractors)
    documents.insert(position, gold)
    return documents


def qa_prompt(question: str, documents: Sequence[Passage], *, query_aware: bool = False) -> str:
    """The paper's multi-document QA prompt; query-aware repeats the question before the documents."""
    results = "\n".join(f"Document [{i}](Title: {d.title}) {d.text}" for i, d in enumerate(documents, 1))
    before = f"Question: {question}\n\n" if query_aware else ""
    return f"{QA_INSTRUCTION}\n\n{before}{results}\n\nQuestion: {question}\nAnswer:"


def closed_book_prompt(question: str) -> str:
    return f"Question: {question}\nAnswer:"


def load_kv(path: Path) -> list[KVExample]:
    return [
        KVExample(tuple((k, v) for k, v in row["ordered_kv_records"]), row["key"], row["value"]) for row in _jsonl(path)
    ]


def place_kv(example: KVExample, position: int) -> list[tuple[str, str]]:
    """The records with the gold pair moved to `position` (0-based), the others in their order."""
    others = [r for r in example.records if r[0] != example.key]
    others.insert(position, (example.key, example.value))
    return others


def kv_prompt(records: Sequence[tuple[str, str]], key: str, *, query_aware: bool = False) -> str:
    """The paper's key-value prompt: the records as one JSON object, one pair per line."""
    lines = [
        ("{" if i == 0 else " ") + f"{json.dumps(k)}: {json.dumps(v)}" + ("}" if i == len(records) - 1 else ",\n")
        for i, (k, v) in enumerate(records)
    ]
    before = f'Key: "{key}"\n\n' if query_aware else ""
    return f'{KV_INSTRUCTION}\n\n{before}JSON data:\n{"".join(lines)}\n\nKey: "{key}"\nCorresponding value:'
