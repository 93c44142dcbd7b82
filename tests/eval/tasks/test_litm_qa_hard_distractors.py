"""`--option litm-qa.distractors=easy,hard`: `easy` is today's cases to the byte; `hard` asks the same generated
question among passages about its own entity and near-misses, none holding the answer, with the gold at each
asked position, in every prompt shape. A run builds both by default; the quick profile pins `easy`."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from contextlift.eval.cases import Case, Grid, Sample
from contextlift.eval.plan import make_plan, task_record
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import litm_qa
from contextlift.eval.tasks.fiction import TEMPLATES, invented_facts
from contextlift.eval.tasks.prompt_shapes import SHAPES
from contextlift.eval.tasks.same_entity import same_entity_distractors
from contextlift.eval.verdicts.results import RunInfo, results
from contextlift.strategies import parse_request
from tests.eval.tasks.rendered_cases import holds, rendered
from tests.eval.tasks.test_prompt_shapes_are_detected import BLANK_LINE_JOINS


def digest(cases: list[Case]) -> str:
    rows = [[c.key, c.system, c.prompt, list(c.gold), c.strategies, c.max_tokens, c.metric] for c in cases]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # The cases the task built before the option existed (seed 3, 10/20/30 documents, 5 samples).
        ("paper", "000198f7cdf3eae098ea1f60b8bda21eaa3cd9b3b04d61b8d9b7e6924f9c9e9f"),
        ("llamaindex", "311037803bb419df78d6a716ea774e3c2e195c8bcaf015406a65d5595332e12f"),
    ],
)
def test_easy_builds_todays_cases_to_the_byte_and_the_default_adds_hard_beside_them(shape: str, expected: str) -> None:
    grid = Grid((10, 20, 30), (), 5, seed=3, options={"prompt": shape})
    default, _ = litm_qa.build(grid, Sources())
    easy, _ = litm_qa.build(replace(grid, options={**grid.options, "distractors": "easy"}), Sources())
    both, _ = litm_qa.build(replace(grid, options={**grid.options, "distractors": "easy,hard"}), Sources())
    assert digest(easy) == expected
    assert {c.variant for c in easy} == {"standard", "closed-book", "oracle"}
    assert default == both
    assert [c for c in default if c.variant != "hard"] == easy
    assert len([c for c in default if c.variant == "hard"]) == len([c for c in easy if c.variant == "standard"])


def test_the_quick_profile_builds_easy_alone_and_the_full_profile_both_regimes() -> None:
    quick = make_plan("quick", tasks=["litm-qa"]).tasks["litm-qa"]
    cases, _ = litm_qa.build(quick, Sources())
    easy, _ = litm_qa.build(replace(quick, options={"distractors": "easy"}), Sources())
    assert cases == easy
    asked = make_plan("quick", tasks=["litm-qa"], options=["litm-qa.distractors=easy,hard"]).tasks["litm-qa"]
    assert {c.variant for c in litm_qa.build(asked, Sources())[0]} == {"standard", "hard", "closed-book", "oracle"}
    full = make_plan("full", tasks=["litm-qa"]).tasks["litm-qa"]
    assert litm_qa.REGIMES.read(full) == ["easy", "hard"]


def test_each_regime_is_a_variant_of_its_own_and_hard_shares_the_generated_baselines() -> None:
    both, notes = litm_qa.build(Grid((10, 20), ("0", "9"), 2, options={"distractors": "hard,easy"}), Sources())
    assert {c.variant for c in both} == {"standard", "hard", "closed-book", "oracle"}
    easy, _ = litm_qa.build(Grid((10, 20), ("0", "9"), 2, options={"distractors": "easy"}), Sources())
    hard, _ = litm_qa.build(Grid((10, 20), ("0", "9"), 2, options={"distractors": "hard"}), Sources())
    assert [c for c in both if c.variant != "hard"] == easy
    assert [c for c in both if c.variant in ("hard", "closed-book", "oracle")] == hard
    assert len(notes) == 2
    assert "generated" in notes[0]
    assert "near-misses" in notes[1]
    assert "its own invented entity" in notes[1]


def test_hard_asks_the_standard_question_with_its_gold_passage() -> None:
    cases = rendered(Grid((10,), ("4",), 3, options={"distractors": "easy,hard"}), Sources())
    by_variant = {(c.variant, c.sample): (question, documents) for c, question, documents in cases}
    for sample in range(3):
        standard, hard = by_variant[("standard", sample)], by_variant[("hard", sample)]
        assert hard[0] == standard[0]
        assert hard[1][4] == standard[1][4]
        assert not set(hard[1]) & set(standard[1]) - {standard[1][4]}


@pytest.mark.parametrize("size", [10, 20, 30])
def test_the_gold_is_at_each_asked_position_and_nowhere_else(size: int) -> None:
    grid = Grid((size,), (), 4, seed=11, options={"distractors": "hard"})
    cases = [(c, d) for c, _, d in rendered(grid, Sources()) if c.variant == "hard"]
    assert sorted({c.position for c, _ in cases}) == litm_qa.paper_positions(size)
    for case, documents in cases:
        assert len(documents) == size
        holding = [i for i, d in enumerate(documents) if holds(d, case.gold)]
        assert holding == [case.position]


def test_no_hard_distractor_holds_the_answer_over_many_seeds() -> None:
    for seed in range(120):
        grid = Grid((10, 20, 30), ("0",), 2, seed=seed, options={"distractors": "hard"})
        for case, _, documents in rendered(grid, Sources()):
            if case.variant == "hard":
                distractors = documents[1:]
                assert len(set(distractors)) == case.size - 1
                assert not [d for d in distractors if holds(d, case.gold)], seed


def test_an_answer_inside_the_entity_name_still_gets_distractors_without_it() -> None:
    gold = TEMPLATES[0].fact("Zorvathly", "Zorvath")
    distractors = same_entity_distractors(random.Random(0), gold, 29)
    assert len(set(distractors)) == 29
    assert not [d for d in distractors if holds(d, ["Zorvath"])]


def test_hard_distractors_are_what_a_retriever_returns_for_the_question() -> None:
    for seed in range(40):
        gold = invented_facts(random.Random(seed), 1)[0]
        distractors = same_entity_distractors(random.Random(seed), gold, 9)
        other_titles = {t.title.format(e=gold.entity) for t in TEMPLATES if t != gold.template}
        # The entity's other facts under their own articles' titles.
        other_facts = [d for d in distractors if d.title in other_titles]
        assert len(other_facts) == 3
        assert all(re.search(rf"\b{gold.entity}\b", d.text) for d in other_facts)
        # Its subject (the question's key noun phrase) under the gold's title, once with a neighbouring fact.
        on_subject = [d for d in distractors if d.title == gold.title]
        assert len(on_subject) >= 3
        assert sum(gold.template.topic.format(e=gold.entity) in d.text for d in on_subject) >= 3
        # Near-misses: the asked fact about a name that reads like the entity's.
        near_misses = [d for d in distractors if d not in other_facts and d not in on_subject]
        title = re.compile(re.escape(gold.template.title).replace(re.escape("{e}"), "(\\w+)"))
        assert len(near_misses) >= 2
        for document in near_misses:
            match = title.fullmatch(document.title)
            assert match, document.title
            name = match[1]
            assert name != gold.entity
            assert name[:2] == gold.entity[:2] or name[-2:] == gold.entity[-2:]
            assert gold.template.statement.split("{a}")[0].format(e=name) in document.text


def test_hard_is_the_same_for_a_seed_and_differs_across_seeds() -> None:
    def grid(seed: int) -> Grid:
        return Grid((10, 20), (), 3, seed=seed, options={"distractors": "hard"})

    first, again, other = (litm_qa.build(grid(s), Sources())[0] for s in (5, 5, 6))
    assert first == again
    assert [c.key for c in first] == [c.key for c in other]
    assert all(a.prompt != b.prompt for a, b in zip(first, other, strict=True))


def test_hard_over_the_papers_questions_has_baselines_of_its_own(tmp_path: Path) -> None:
    rows = [
        {"question": f"question {i}?", "answers": [f"answer{i}"], "ctxs": [{"title": f"t{i}", "text": f"answer{i}"}]}
        for i in range(6)
    ]
    oracle = tmp_path / "nq-open-oracle.jsonl"
    oracle.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cases, notes = litm_qa.build(Grid((4,), ("0",), 2, options={"distractors": "easy,hard"}), Sources(oracle))
    variants = {c.variant for c in cases}
    assert variants == {"standard", "hard", "closed-book", "oracle", "hard closed-book", "hard oracle"}
    by_key = {(c.variant, c.sample): c for c in cases}
    for sample in range(2):
        assert by_key[("closed-book", sample)].prompt.startswith("Question: question ")
        assert by_key[("hard closed-book", sample)].prompt != by_key[("closed-book", sample)].prompt
    assert "oracle file" in notes[0]
    assert "`hard`" in notes[1]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_proxy_finds_every_hard_document_in_every_shape(shape: str) -> None:
    grid = Grid((10, 20), ("0", "9"), 2, options={"prompt": shape, "distractors": "hard"})
    cases = [c for c in litm_qa.build(grid, Sources())[0] if c.position is not None]
    assert len(cases) == 8
    for case in cases:
        request = parse_request({"model": "m", "messages": case.messages})
        if shape in BLANK_LINE_JOINS:  # declined whole: a blank line is no boundary (test_prompt_shapes_are_detected)
            assert request.detection == "none: ambiguous-chunks"
            continue
        assert len(request.documents) == case.size
        assert request.question
        assert request.question in case.prompt
        assert request.render() == {"model": "m", "messages": case.messages}


@pytest.mark.parametrize("value", ["hard,nope", "medium", ","])
def test_an_unknown_regime_is_refused_with_the_choices(value: str) -> None:
    with pytest.raises(ValueError, match=r"distractors.*; choose easy, hard, squad$"):
        make_plan("quick", options=[f"litm-qa.distractors={value}"])
    with pytest.raises(ValueError, match=r"choose easy, hard, squad$"):
        litm_qa.build(Grid((10,), ("0",), 1, options={"distractors": value}), Sources())


def test_the_regimes_are_a_litm_qa_option_only() -> None:
    plan = make_plan("quick", options=["litm-qa.distractors=squad, hard"])
    assert plan.tasks["litm-qa"].options == {"distractors": "squad, hard"}
    assert litm_qa.distractor_regimes("squad, hard,hard") == ["hard", "squad"]
    with pytest.raises(ValueError, match="swim has no option 'distractors'"):
        make_plan("quick", options=["swim.distractors=hard"])


def test_the_report_shows_each_regime_side_by_side_with_where_its_distractors_came_from() -> None:
    grid = Grid((10,), ("0", "9"), 2, options={"distractors": "easy,hard"})
    cases, notes = litm_qa.build(grid, Sources())
    samples = [
        Sample.of(
            {
                "task": c.task,
                "variant": c.variant,
                "size": c.size,
                "position": c.position,
                "sample": c.sample,
                "strategy": strategy,
                "case": c.key,
                "score": float(c.variant == "standard" or strategy == "none"),
                "error": None,
                "latency_s": 1.0,
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "upstream_calls": 1,
            }
        )
        for c in cases
        for strategy in c.strategies or ("none", "reorder")
    ]
    tasks = {"litm-qa": task_record("litm-qa", make_plan("quick", ["litm-qa"]).tasks["litm-qa"])}
    data = results(samples, RunInfo("m", "http://proxy/v1", ("none", "reorder"), 0, "quick", tuple(notes), tasks))
    markdown = render_markdown(data)
    for heading in ("standard", "hard", "closed-book", "oracle"):
        assert f"### {heading}, 10 documents\n" in markdown
    assert {(r["variant"], r["strategy"], r["value"]) for r in data["lift"]} == {
        ("standard", "reorder", 0.0),
        ("hard", "reorder", -1.0),
    }
    assert "- litm-qa, variant `hard`: generated fictional-fact questions" in markdown
