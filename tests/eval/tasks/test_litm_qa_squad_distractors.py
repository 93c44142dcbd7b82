"""`--option litm-qa.distractors=squad`: an answerable SQuAD 2.0 dev question with its paragraph among other
paragraphs of the same Wikipedia article, none holding any of its answers; read from the real file in
../shared/data, as `--data` finds it (skipped without it: tests/benchmark_data.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from contextlift.eval.cases import Grid
from contextlift.eval.metrics import normalize_answer
from contextlift.eval.sources import Sources, find_sources
from contextlift.eval.tasks import litm_qa
from contextlift.eval.tasks.litm import Passage
from contextlift.eval.tasks.prompt_shapes import SHAPES
from contextlift.eval.tasks.squad import load_squad, same_article_questions
from contextlift.strategies import parse_request
from tests.benchmark_data import SQUAD, data_file, data_folder
from tests.eval.tasks.rendered_cases import holds, rendered
from tests.eval.tasks.test_prompt_shapes_are_detected import BLANK_LINE_JOINS


@pytest.fixture(scope="module")
def squad() -> Path:
    return data_file(SQUAD)


@pytest.fixture(scope="module")
def sources() -> Sources:
    return find_sources(data_folder(SQUAD))


def squad_grid(sizes: tuple[int, ...], samples: int, seed: int = 0, **options: str) -> Grid:
    return Grid(sizes, (), samples, seed=seed, options={"distractors": "squad", **options})


def test_squad_without_the_file_is_refused_naming_data() -> None:
    with pytest.raises(ValueError, match=r"squad-v2\.0-dev\.json.*--data"):
        litm_qa.build(squad_grid((10,), 1), Sources())


@pytest.mark.parametrize("size", [10, 20])
def test_the_gold_paragraph_is_at_each_position_among_its_articles_others(
    sources: Sources, squad: Path, size: int
) -> None:
    paragraphs = {(a.title, p.text) for a in load_squad(squad) for p in a.paragraphs}
    cases = [(c, q, d) for c, q, d in rendered(squad_grid((size,), 6), sources) if c.variant == "hard-squad"]
    assert sorted({c.position for c, _, _ in cases}) == litm_qa.paper_positions(size)
    for case, question, documents in cases:
        assert len(set(documents)) == size
        assert len({d.title for d in documents}) == 1
        assert "_" not in documents[0].title
        assert all((d.title, d.text) in paragraphs for d in documents)
        holding = [i for i, d in enumerate(documents) if holds(d, case.gold)]
        assert holding == [case.position], question


def test_no_squad_distractor_holds_any_answer(squad: Path) -> None:
    normalised = functools.cache(normalize_answer)  # each paragraph is checked against every question of its article

    def holding(document: Passage, answers: tuple[str, ...]) -> bool:
        title, text = normalised(document.title), normalised(document.text)
        return any(normalised(a) in title or normalised(a) in text for a in answers)

    questions = same_article_questions(squad)
    assert len(questions) > 5000
    for question in questions:
        assert holding(question.gold, question.answers)
        assert not [d for d in question.others if holding(d, question.answers)]
        assert question.gold not in question.others
        assert all(d.title == question.gold.title for d in question.others)


def test_squad_cases_are_the_same_for_a_seed_and_have_baselines_of_their_own(sources: Sources) -> None:
    first, notes = litm_qa.build(squad_grid((10, 20), 3, seed=2), sources)
    again, _ = litm_qa.build(squad_grid((10, 20), 3, seed=2), sources)
    other, _ = litm_qa.build(squad_grid((10, 20), 3, seed=3), sources)
    assert first == again
    assert sum(a.prompt != b.prompt for a, b in zip(first, other, strict=True)) == len(first)
    assert {c.variant for c in first} == {"hard-squad", "hard-squad closed-book", "hard-squad oracle"}
    closed_book = next(c for c in first if c.variant == "hard-squad closed-book")
    assert closed_book.prompt.startswith("Question: ")
    assert closed_book.strategies == ("none",)
    assert notes == [next(n for n in notes if "SQuAD 2.0 dev (squad-v2.0-dev.json)" in n)]
    assert "same Wikipedia article" in notes[0]


def test_every_regime_side_by_side(sources: Sources) -> None:
    cases, notes = litm_qa.build(Grid((10,), ("0", "9"), 2, options={"distractors": "easy,hard,squad"}), sources)
    assert {c.variant for c in cases} == {
        "standard",
        "hard",
        "hard-squad",
        "closed-book",
        "oracle",
        # `standard` replays the oracle file here, so the generated `hard` questions have baselines of their own.
        "hard closed-book",
        "hard oracle",
        "hard-squad closed-book",
        "hard-squad oracle",
    }
    assert len(notes) == 3


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_proxy_finds_every_squad_document_in_every_shape(sources: Sources, shape: str) -> None:
    grid = Grid((10, 20), ("0", "9"), 2, options={"prompt": shape, "distractors": "squad"})
    cases = [c for c in litm_qa.build(grid, sources)[0] if c.position is not None]
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
