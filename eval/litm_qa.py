"""`litm-qa`: Lost in the Middle's multi-document QA. The paper's prompt and document lines (or, with the
`prompt` option, a framework's shape: `eval.prompt_shapes`), the gold at each position among N documents, plus
the closed-book and oracle baselines. Closed-book is the question alone under every shape: with no documents
there is no app's shape to copy.

Sources, in order of preference for each (N, position): the paper's positional file; the oracle file with
distractors drawn from other questions' gold passages that hold no answer (the report says so); otherwise a
generated fictional-fact QA, deterministic from the seed.
"""

from __future__ import annotations

import functools
from pathlib import Path

from eval.cases import Case, Grid, TaskInfo, case_rng, resolve_positions
from eval.fiction import invented_facts, paragraph
from eval.litm import (
    Passage,
    QAExample,
    closed_book_prompt,
    distractors_from_other_questions,
    load_qa,
    place,
)
from eval.prompt_shapes import PAPER, Chat, prompt_shape
from eval.sources import Sources

INFO = TaskInfo(
    "litm-qa", "Multi-document QA (Lost in the Middle)", "documents", "gold document index", "best_subspan_em"
)
MAX_TOKENS = 32
"""The paper allows 100; answers are a few words, only the first line is scored, and on CPU every generated
token costs time across thousands of requests."""


@functools.cache
def _load(path: Path) -> list[QAExample]:
    return load_qa(path)


def paper_positions(documents: int) -> list[int]:
    """0, 4, 9, ...: the paper's gold positions for 10, 20 and 30 documents."""
    return [0, *range(4, documents, 5)]


def build(grid: Grid, sources: Sources) -> tuple[list[Case], list[str]]:
    shape = prompt_shape(grid.options.get("prompt", PAPER))
    cases: list[Case] = []
    notes: list[str] = []
    oracle = _load(sources.qa_oracle) if sources.qa_oracle else None
    if sources.qa_oracle and not sources.qa_positional:
        notes.append(
            "litm-qa: only the oracle file was given, so each question's distractors are other "
            "questions' gold passages that contain none of its answers (not the paper's retrieved ones)."
        )
    elif not sources.qa_oracle and not sources.qa_positional:
        notes.append("litm-qa: generated fictional-fact QA (invented entities; no model knows the answers).")
    for size in grid.sizes:
        positions = resolve_positions(grid.positions, size, indexed=True) if grid.positions else paper_positions(size)
        for sample in range(grid.samples):
            examples = _examples(grid, sources, oracle, size, positions, sample)
            for position, (example, documents) in examples.items():
                chat = shape(example.question, documents)
                cases.append(_case("standard", size, position, sample, chat, example.answers))
            example, _ = next(iter(examples.values()))
            closed_book = Chat(None, closed_book_prompt(example.question))
            cases.append(_case("closed-book", size, None, sample, closed_book, example.answers, baseline=True))
            oracle_chat = shape(example.question, [example.gold])
            cases.append(_case("oracle", size, None, sample, oracle_chat, example.answers, baseline=True))
    return cases, notes


def _examples(
    grid: Grid, sources: Sources, oracle: list[QAExample] | None, size: int, positions: list[int], sample: int
) -> dict[int, tuple[QAExample, list[Passage]]]:
    """For one sample: the same question and distractors, the gold at each position."""
    rng = case_rng(grid.seed, INFO.name, size, sample)
    found: dict[int, tuple[QAExample, list[Passage]]] = {}
    for position in positions:
        path = sources.positional_file(size, position)
        if path is not None:
            rows = _load(path)
            order = case_rng(grid.seed, INFO.name, "row").sample(range(len(rows)), len(rows))
            example = rows[order[sample % len(rows)]]
            found[position] = (example, place(example.gold, example.distractors, position))
    missing = [p for p in positions if p not in found]
    if not missing:
        return found
    if oracle:
        order = case_rng(grid.seed, INFO.name, "row").sample(range(len(oracle)), len(oracle))
        example = oracle[order[sample % len(oracle)]]
        distractors = distractors_from_other_questions(example, oracle, size - 1, rng)
    else:
        facts = invented_facts(rng, size)
        passages = [Passage(f.title, paragraph(rng, f, 3)) for f in facts]
        example = QAExample(facts[0].question, (facts[0].answer,), passages[0], tuple(passages[1:]))
        distractors = list(example.distractors)
    for position in missing:
        found[position] = (example, place(example.gold, distractors, position))
    return dict(sorted(found.items()))


def _case(
    variant: str,
    size: int,
    position: int | None,
    sample: int,
    chat: Chat,
    answers: tuple[str, ...],
    *,
    baseline: bool = False,
) -> Case:
    return Case(
        INFO.name,
        variant,
        size,
        position,
        sample,
        chat.user,
        answers,
        INFO.metric,
        MAX_TOKENS,
        strategies=("none",) if baseline else None,
        system=chat.system,
    )
