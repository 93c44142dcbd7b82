"""Every task's generator is deterministic for a seed and puts the gold where it was asked to."""

from __future__ import annotations

import json
import re

import pytest

from contextlift.eval.cases import Grid, resolve_positions
from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import length, litm_kv, litm_qa, multifact, swim
from contextlift.eval.tasks.litm import QA_INSTRUCTION
from contextlift.strategies import DocumentFormat, parse_request

NO_FILES = Sources()


def documents(prompt: str) -> list[str]:
    request = parse_request({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    return [d.text for d in request.documents]


def test_positions_resolve_to_the_papers_first_middle_and_last() -> None:
    assert resolve_positions(["0%", "50%", "100%"], 10, indexed=True) == [0, 4, 9]
    assert resolve_positions(["0%", "50%", "100%"], 20, indexed=True) == [0, 9, 19]
    assert resolve_positions(["0", "4", "12"], 10, indexed=True) == [0, 4]  # past the end is dropped
    assert resolve_positions(["25%", "25"], 101, indexed=False) == [25]
    assert litm_qa.paper_positions(30) == [0, 4, 9, 14, 19, 24, 29]


def test_the_whole_quick_plan_is_the_same_for_a_seed_and_differs_across_seeds() -> None:
    first, _ = build_cases(make_plan("quick", seed=3), NO_FILES)
    again, _ = build_cases(make_plan("quick", seed=3), NO_FILES)
    other, _ = build_cases(make_plan("quick", seed=4), NO_FILES)
    assert [c.prompt for c in first] == [c.prompt for c in again]
    assert [c.key for c in first] == [c.key for c in other]
    assert sum(a.prompt != b.prompt for a, b in zip(first, other, strict=True)) > len(first) // 2
    assert {c.task for c in first} == {"litm-qa", "litm-kv", "swim", "length", "multifact"}


def test_litm_qa_generated_moves_the_same_gold_among_the_same_distractors() -> None:
    cases, notes = litm_qa.build(Grid((10,), ("0", "4", "9"), 2), NO_FILES)
    assert "generated" in notes[0]
    for sample in range(2):
        standard = [c for c in cases if c.sample == sample and c.variant == "standard"]
        assert [c.position for c in standard] == [0, 4, 9]
        docs = [documents(c.prompt) for c in standard]
        answer = standard[0].gold[0]
        assert [next(i for i, d in enumerate(ds) if answer in d) for ds in docs] == [0, 4, 9]
        assert all(sorted(ds) == sorted(docs[0]) for ds in docs)
        assert all(sum(answer in d for d in ds) == 1 for ds in docs)  # the answer is nowhere else
        assert standard[0].prompt.startswith(QA_INSTRUCTION)
        baselines = {c.variant: c for c in cases if c.sample == sample and c.position is None}
        assert baselines["closed-book"].prompt.startswith("Question: ")
        assert baselines["closed-book"].strategies == ("none",)
        assert len(documents(baselines["oracle"].prompt)) == 1


def test_litm_kv_generated_in_the_papers_format_with_the_pair_moved() -> None:
    cases, _ = litm_kv.build(Grid((20,), ("0", "10", "19"), 1), NO_FILES)
    standard = [c for c in cases if c.variant == "standard"]
    for case in standard:
        body = case.prompt.split("JSON data:\n", 1)[1].split("\n\nKey:", 1)[0]
        records = list(json.loads(body).items())
        assert len(records) == 20
        key = re.search(r'Key: "([^"]+)"\nCorresponding value:$', case.prompt)[1]  # type: ignore[index]
        assert records[case.position] == (key, case.gold[0])  # type: ignore[index]
        parsed = parse_request({"model": "m", "messages": [{"role": "user", "content": case.prompt}]})
        assert parsed.block is not None
        assert parsed.block.format is DocumentFormat.JSON_KV
    query_aware = [c for c in cases if c.variant == "query-aware prompt"]
    assert len(query_aware) == 3
    assert all(c.strategies == ("none",) and '\n\nKey: "' in c.prompt.split("JSON data:")[0] for c in query_aware)


@pytest.mark.parametrize("depth", [0, 50, 100])
def test_swim_puts_the_answer_document_at_the_depth(depth: int) -> None:
    cases, _ = swim.build(Grid((100,), (str(depth),), 2, options={"budget": "900"}), NO_FILES)
    for case in [c for c in cases if c.variant == "standard"]:
        docs = documents(case.prompt)
        holding = [i for i, d in enumerate(docs) if case.gold[0] in d]
        assert len(holding) == 1
        assert holding[0] == round(depth / 100 * (len(docs) - 1))
    control = [c for c in cases if c.variant == "control"]
    assert control[0].temperature == 0.7
    assert control[0].strategies == ("none", "medoid; k=5; permute=off", "medoid; k=5")


def test_swim_context_size_grows_with_the_share_of_the_budget() -> None:
    cases, _ = swim.build(Grid((25, 50, 100), ("0",), 1, options={"budget": "1200"}), NO_FILES)
    counts = [len(documents(c.prompt)) for c in cases if c.variant == "standard"]
    assert counts == sorted(counts)
    assert counts[0] < counts[-1]


def test_length_distraction_has_the_token_count_and_the_evidence_moves() -> None:
    cases, _ = length.build(Grid((0, 1000), ("0", "100"), 1, options={"problems": "varsum,gsm8k"}), NO_FILES)
    by_key = {(c.variant, c.size, c.position): c for c in cases}
    assert ("varsum, whitespace", 0, 100) not in by_key  # no distraction: first and last are the same prompt
    first, last = by_key[("varsum, whitespace", 1000, 0)], by_key[("varsum, whitespace", 1000, 100)]
    assert first.prompt.index("x1 = ") < first.prompt.index("# Others")
    assert last.prompt.index("# Others") < last.prompt.index("x1 = ") < last.prompt.index("# Question")
    assert first.prompt.endswith("# Answer\nLet's think step by step.")
    distraction = first.prompt.split("# Others\n", 1)[1].split("# Question", 1)[0]
    from contextlift.strategies import TiktokenTokenizer

    assert 950 <= TiktokenTokenizer().count(re.sub(r"</?document[^>]*>", "", distraction)) <= 1010
    # The evidence is the task's first element; the distraction's elements, under their own heading, are another run
    # of elements, which detection leaves apart from it (it moves no document across a section's heading).
    evidence = first.prompt.split("</document>", 1)[0]
    question = first.prompt.rsplit("# Question\n", 1)[1]
    names = re.findall(r"x\d+", question)
    values = dict(re.findall(r"(x\d+) = (\d+)", evidence))
    assert len(names) == 3
    assert first.gold == (str(sum(int(values[n]) for n in names)),)
    assert by_key[("gsm8k, whitespace", 0, 0)].gold[0].isdigit()


def test_multifact_hides_every_needle_and_asks_for_the_queried_keys() -> None:
    cases, _ = multifact.build(Grid((1500,), (), 2, options={"needles": "K3V2Q2"}), NO_FILES)
    for case in cases:
        assert len(case.gold) == 4  # 2 queried keys x 2 values
        assert all(case.prompt.count(v) == 1 for v in case.gold)
        assert case.prompt.count("One of the special magic numbers for") == 6
        assert len(documents(case.prompt)) >= 5
    with pytest.raises(ValueError, match="KxVyQz"):
        multifact.NeedleConfig.parse("K2V2")
    with pytest.raises(ValueError, match="no more queries than keys"):
        multifact.NeedleConfig.parse("K1V2Q2")
