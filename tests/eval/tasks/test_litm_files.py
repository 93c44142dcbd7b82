"""Lost in the Middle's own files from ../shared/data: records read, prompts rendered exactly as the paper's,
the gold placed where asked (skipped without the files: tests/benchmark_data.py)."""

from __future__ import annotations

import json
import random

import pytest

from contextlift.eval.metrics import normalize_answer
from contextlift.eval.tasks.litm import (
    closed_book_prompt,
    distractors_from_other_questions,
    kv_prompt,
    load_kv,
    load_qa,
    place,
    place_kv,
    qa_prompt,
)
from contextlift.strategies import DocumentFormat, parse_request
from tests.benchmark_data import LITM_KV_75, LITM_KV_140, LITM_ORACLE, data_file


@pytest.fixture(scope="module")
def oracle() -> list:  # type: ignore[type-arg]
    return load_qa(data_file(LITM_ORACLE))


def test_oracle_file_has_every_question_with_its_gold(oracle: list) -> None:  # type: ignore[type-arg]
    assert len(oracle) == 2655
    assert all(e.answers and e.gold.text for e in oracle)
    assert all(e.distractors == () for e in oracle)


@pytest.mark.parametrize("position", [0, 4, 9])
def test_gold_placed_where_asked_among_distractors_without_the_answer(oracle: list, position: int) -> None:  # type: ignore[type-arg]
    example = oracle[7]
    distractors = distractors_from_other_questions(example, oracle, 9, random.Random(0))
    documents = place(example.gold, distractors, position)
    assert len(documents) == 10
    assert documents[position] == example.gold
    answers = [normalize_answer(a) for a in example.answers]
    assert not any(a in normalize_answer(d.text) for d in distractors for a in answers)


def test_qa_prompt_is_the_papers_and_the_proxy_reads_it_back(oracle: list) -> None:  # type: ignore[type-arg]
    example = oracle[0]
    documents = place(example.gold, distractors_from_other_questions(example, oracle, 2, random.Random(1)), 1)
    prompt = qa_prompt(example.question, documents)
    lines = prompt.split("\n")
    assert lines[0] == (
        "Write a high-quality answer for the given question using only the provided search results "
        "(some of which might be irrelevant)."
    )
    assert lines[2] == f"Document [1](Title: {documents[0].title}) {documents[0].text}"
    assert lines[3] == f"Document [2](Title: {example.gold.title}) {example.gold.text}"
    assert prompt.endswith(f"\n\nQuestion: {example.question}\nAnswer:")
    parsed = parse_request({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    assert parsed.block is not None
    assert parsed.block.format is DocumentFormat.LITM
    assert len(parsed.documents) == 3
    assert parsed.question == example.question
    aware = qa_prompt(example.question, documents, query_aware=True)
    assert f"(some of which might be irrelevant).\n\nQuestion: {example.question}\n\nDocument [1]" in aware
    assert closed_book_prompt(example.question) == f"Question: {example.question}\nAnswer:"


@pytest.mark.parametrize("position", [0, 37, 74])
def test_kv_gold_pair_moved_where_asked_and_prompt_rendered_as_the_paper(position: int) -> None:
    examples = load_kv(data_file(LITM_KV_75))
    assert len(examples) == 500
    example = examples[3]
    records = place_kv(example, position)
    assert len(records) == 75
    assert records[position] == (example.key, example.value)
    prompt = kv_prompt(records, example.key)
    data = prompt.split("JSON data:\n", 1)[1].split("\n\nKey:", 1)[0]
    assert json.loads(data) == dict(records)
    assert data.startswith('{"')
    assert data.endswith('"}')
    assert data.count(",\n ") == 74
    assert prompt.endswith(f'\n\nKey: "{example.key}"\nCorresponding value:')
    parsed = parse_request({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    assert len(parsed.documents) == 75
    assert parsed.render()["messages"][0]["content"] == prompt


def test_kv_140_file_reads() -> None:
    examples = load_kv(data_file(LITM_KV_140))
    assert len(examples) == 500
    assert all(len(e.records) == 140 for e in examples[:5])
