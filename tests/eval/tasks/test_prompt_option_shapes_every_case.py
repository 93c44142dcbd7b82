"""`--option litm-qa.prompt=SHAPE` and `swim.prompt=SHAPE`: the paper's prompt unless asked, the same questions
and documents in every shape, closed-book left as the question alone, and the shape named in the run's record."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from contextlift.eval.cases import Case, Grid, Sample
from contextlift.eval.plan import make_plan, task_record
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import litm_qa, swim
from contextlift.eval.tasks.litm import Passage, qa_prompt
from contextlift.eval.tasks.prompt_shapes import SHAPES, Chat
from contextlift.eval.verdicts.results import RunInfo, results

GRIDS = {
    "litm-qa": Grid((10,), ("0", "9"), 2),
    "swim": Grid((50, 100), ("0", "100"), 2, options={"budget": "600"}),
}


def build(task: str, options: dict[str, str]) -> list[Case]:
    grid = GRIDS[task]
    grid = Grid(grid.sizes, grid.positions, grid.samples, options={**grid.options, **options})
    return (litm_qa.build if task == "litm-qa" else swim.build)(grid, Sources())[0]


@pytest.mark.parametrize("task", list(GRIDS))
def test_the_paper_prompt_is_the_default_one_user_message(task: str) -> None:
    default, paper = build(task, {}), build(task, {"prompt": "paper"})
    assert default == paper
    assert all(c.system is None and c.messages == [{"role": "user", "content": c.prompt}] for c in default)


@pytest.mark.parametrize("task", list(GRIDS))
def test_a_shape_renders_the_papers_questions_and_documents_in_every_case_but_closed_book(
    task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, list[Passage]]] = []

    def recording(question: str, documents: Any) -> Chat:
        seen.append((question, list(documents)))
        return Chat(f"system {len(seen)}", f"user {len(seen)}")

    monkeypatch.setitem(SHAPES, "dspy", recording)
    shaped, paper = build(task, {"prompt": "dspy"}), build(task, {})
    assert [c.key for c in shaped] == [c.key for c in paper]
    rendered = [(s, p) for s, p in zip(shaped, paper, strict=True) if s.variant != "closed-book"]
    assert [qa_prompt(question, documents) for question, documents in seen] == [p.prompt for _, p in rendered]
    numbers = range(1, len(seen) + 1)
    assert [(s.system, s.prompt) for s, _ in rendered] == [(f"system {i}", f"user {i}") for i in numbers]
    closed_book = [(s, p) for s, p in zip(shaped, paper, strict=True) if s.variant == "closed-book"]
    assert all(s == p and s.system is None for s, p in closed_book)


def test_a_system_message_changes_the_prompt_hash_and_a_prompt_alone_keeps_its_own() -> None:
    alone = Case("t", "standard", 1, 0, 0, "the prompt", ("a",), "best_subspan_em")
    assert alone.prompt_hash == hashlib.sha256(b"the prompt").hexdigest()[:16]
    with_system = Case("t", "standard", 1, 0, 0, "the prompt", ("a",), "best_subspan_em", system="be brief")
    assert with_system.prompt_hash != alone.prompt_hash
    assert with_system.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "the prompt"},
    ]


def test_an_unknown_shape_is_refused_with_the_choices() -> None:
    choices = "paper, langchain-stuff, langchain-stuff-separated, langchain-retrievalqa, llamaindex, dspy"
    with pytest.raises(ValueError, match=f"unknown prompt shape; choose {choices}$"):
        make_plan("quick", options=["litm-qa.prompt=langchain"])
    with pytest.raises(ValueError, match="litm-kv has no option 'prompt'"):
        make_plan("quick", options=["litm-kv.prompt=dspy"])


def test_the_run_record_and_the_report_name_the_shape_of_each_task_that_has_one() -> None:
    plan = make_plan("quick", ["litm-qa", "swim", "litm-kv"], options=["swim.prompt=llamaindex"])
    tasks = {task: task_record(task, grid) for task, grid in plan.tasks.items()}
    assert (tasks["litm-qa"]["prompt"], tasks["swim"]["prompt"]) == ("paper", "llamaindex")
    assert "prompt" not in tasks["litm-kv"]
    sample = Sample.of(
        {
            "task": "swim",
            "variant": "standard",
            "size": 50,
            "position": 0,
            "sample": 0,
            "strategy": "none",
            "case": "swim|standard|50|0|0",
            "score": 1.0,
            "error": None,
            "latency_s": 1.0,
            "prompt_tokens": 10,
            "completion_tokens": 1,
            "upstream_calls": 1,
        }
    )
    info = RunInfo("m", "http://proxy/v1", ("none",), 0, "quick", (), tasks)
    markdown = render_markdown(results([sample], info))
    assert "## swim: Single-document QA (SWiM)\n\nprompt shape: `llamaindex`\n" in markdown
