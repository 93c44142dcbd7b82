"""The litm-qa cases with what each was rendered from, for tests that check documents rather than prompt text."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contextlift.eval.cases import Case, Grid
from contextlift.eval.metrics import holds_answer
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import litm_qa
from contextlift.eval.tasks.litm import Passage
from contextlift.eval.tasks.prompt_shapes import PAPER, SHAPES, Chat


def rendered(grid: Grid, sources: Sources) -> list[tuple[Case, str, list[Passage]]]:
    """Each case but the closed-book ones, with the question and documents its prompt was rendered from."""
    seen: list[tuple[str, list[Passage]]] = []
    name = grid.options.get("prompt", PAPER)
    shape = SHAPES[name]

    def recording(question: str, documents: Sequence[Passage]) -> Chat:
        seen.append((question, list(documents)))
        return shape(question, documents)

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(SHAPES, name, recording)
        cases, _ = litm_qa.build(grid, sources)
    shaped = [c for c in cases if not c.variant.endswith("closed-book")]
    return [(case, question, documents) for case, (question, documents) in zip(shaped, seen, strict=True)]


def holds(document: Passage, answers: Sequence[str]) -> bool:
    """Whether the document's title or its text holds an answer, normalised as `best_subspan_em` normalises."""
    return holds_answer(document.title, answers) or holds_answer(document.text, answers)
