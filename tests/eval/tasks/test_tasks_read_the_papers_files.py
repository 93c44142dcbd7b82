"""The tasks over the real files in ../shared/data, found as `--data` finds them: GSM8K, SQuAD 2.0 and Lost in
the Middle's oracle and KV files (skipped without them: tests/benchmark_data.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextlift.eval.cases import Grid
from contextlift.eval.metrics import normalize_answer
from contextlift.eval.sources import find_sources
from contextlift.eval.tasks import length, litm_kv, litm_qa, swim
from contextlift.eval.tasks.litm import load_kv, load_qa
from tests.benchmark_data import GSM8K, LITM_KV_75, LITM_KV_140, LITM_ORACLE, SQUAD, data_folder


@pytest.fixture(scope="module")
def data() -> Path:
    return data_folder(GSM8K, SQUAD, LITM_ORACLE, LITM_KV_75, LITM_KV_140)


@pytest.fixture(scope="module")
def sources(data: Path):  # type: ignore[no-untyped-def]
    return find_sources(data)


def test_data_folder_is_searched_by_the_papers_file_names(sources, data: Path) -> None:  # type: ignore[no-untyped-def]
    assert sources.qa_oracle == data / "litm" / "nq-open-oracle.jsonl.gz"
    assert sorted(n for n, _ in sources.kv) == [75, 140]
    assert sources.gsm8k == data / "gsm8k" / "test.jsonl"
    assert sources.squad == data / "squad" / "squad-v2.0-dev.json"


def test_gsm8k_splits_evidence_from_the_last_sentence_and_reads_the_final_answer(sources) -> None:  # type: ignore[no-untyped-def]
    problems = length.load_gsm8k(sources.gsm8k)
    assert len(problems) == 1319
    evidence, question, answer = problems[0]
    assert evidence.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert question == "How much in dollars does she make every day at the farmers' market?"
    assert answer == "18"
    assert all(a.lstrip("-").replace(".", "").isdigit() for _, _, a in problems)


def test_length_over_gsm8k_uses_the_file(sources) -> None:  # type: ignore[no-untyped-def]
    cases, notes = length.build(Grid((0,), ("0",), 3, options={"problems": "gsm8k"}), sources)
    assert notes == []
    known = {(e, a) for e, _, a in length.load_gsm8k(sources.gsm8k)}
    for case in cases:
        evidence = case.prompt.split('<document index="1">', 1)[1].split("</document>", 1)[0]
        assert (evidence, case.gold[0]) in known


def test_squad_answerable_questions_become_swim_items(sources) -> None:  # type: ignore[no-untyped-def]
    items = swim.load_squad(sources.squad)
    assert len(items) == 5928  # SQuAD 2.0 dev: 5,928 answerable questions
    assert all(any(normalize_answer(a) in normalize_answer(i.document.text) for a in i.answers) for i in items[:500])
    cases, notes = swim.build(Grid((100,), ("50",), 2, options={"budget": "1500"}), sources)
    assert "SQuAD" in notes[0]
    assert all(len(c.prompt) > 1000 for c in cases)


def test_litm_qa_from_the_oracle_file_draws_distractors_without_the_answer(sources) -> None:  # type: ignore[no-untyped-def]
    cases, notes = litm_qa.build(Grid((10,), ("0", "9"), 2), sources)
    assert "other questions' gold passages" in notes[0]
    oracle = {e.question: e for e in load_qa(sources.qa_oracle)}
    for case in [c for c in cases if c.variant == "standard"]:
        question = case.prompt.rsplit("Question: ", 1)[1].removesuffix("\nAnswer:")
        example = oracle[question]
        lines = [line for line in case.prompt.splitlines() if line.startswith("Document [")]
        assert len(lines) == 10
        assert (
            lines[case.position] == f"Document [{case.position + 1}](Title: {example.gold.title}) {example.gold.text}"
        )  # type: ignore[index]
        others = [normalize_answer(line) for i, line in enumerate(lines) if i != case.position]
        assert not any(normalize_answer(a) in o for a in example.answers for o in others)


def test_litm_kv_reads_the_75_key_file(sources) -> None:  # type: ignore[no-untyped-def]
    rows = {r.key: r for r in load_kv(dict(sources.kv)[75])}
    cases, notes = litm_kv.build(Grid((75,), ("0%", "50%", "100%"), 2), sources)
    assert notes == []
    assert sorted({c.position for c in cases}) == [0, 37, 74]
    for case in cases:
        key = case.prompt.rsplit('Key: "', 1)[1].split('"', 1)[0]
        assert rows[key].value == case.gold[0]
