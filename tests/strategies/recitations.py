"""The litm-qa cases behind `fixtures/smollm2_recitations.jsonl`, for the test that reads it and the script that
records it (`scripts/collect_recitations.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from contextlift.eval.cases import Case, Grid
from contextlift.eval.sources import Sources
from contextlift.eval.tasks.litm_qa import build

FIXTURE = Path(__file__).parent / "fixtures" / "smollm2_recitations.jsonl"


def recitation_cases(samples: int) -> list[Case]:
    """The positional cases of litm-qa at 10 documents, gold first / middle / last, easy and hard distractors."""
    grid = Grid((10,), ("0%", "50%", "100%"), samples, options={"distractors": "easy,hard"})
    cases, _ = build(grid, Sources())
    return [c for c in cases if c.position is not None]


def recorded() -> list[tuple[Case, str]]:
    """Each fixture line's case with the model's output."""
    lines: list[dict[str, Any]] = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    cases = recitation_cases(max(line["sample"] for line in lines) + 1)
    pairs = []
    for case, line in zip(cases, lines, strict=False):
        assert (case.variant, case.position, case.sample) == (line["variant"], line["position"], line["sample"])
        pairs.append((case, line["output"]))
    return pairs
