"""A regime with its own questions draws its own closed-book and oracle lines, not the standard questions'."""

from __future__ import annotations

from contextlift.eval.report.plots import _baselines_of, _is_baseline


def cell(variant: str, value: float) -> dict[str, object]:
    return {"variant": variant, "value": value, "size": 10, "position": None}


ROWS = [
    cell("closed-book", 0.1),
    cell("oracle", 0.9),
    cell("hard-squad closed-book", 0.2),
    cell("hard-squad oracle", 0.7),
]


def test_a_regime_with_its_own_baselines_gets_them() -> None:
    assert [(a["variant"], a["value"]) for a in _baselines_of("hard-squad", ROWS)] == [
        ("closed-book", 0.2),
        ("oracle", 0.7),
    ]


def test_a_regime_sharing_the_standard_questions_gets_the_shared_baselines() -> None:
    assert [(a["variant"], a["value"]) for a in _baselines_of("hard", ROWS)] == [("closed-book", 0.1), ("oracle", 0.9)]


def test_prefixed_baselines_are_not_plotted_as_regimes() -> None:
    assert _is_baseline("hard-squad oracle")
    assert not _is_baseline("hard-squad")
