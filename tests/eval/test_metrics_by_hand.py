"""The papers' metrics on hand-checked examples, Lost in the Middle's normalisation edge cases included."""

from __future__ import annotations

import pytest

from contextlift.eval.metrics import best_subspan_em, normalize_answer, numeric_match, substring_match, value_recall


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  A  tale of   an Apple ", "tale of apple"),
        ("theatre", "theatre"),  # "the" only as a word
        ("U.S.A.", "usa"),
        ("rock 'n' roll", "rock n roll"),
    ],
)
def test_squad_normalisation(text: str, normalised: str) -> None:
    assert normalize_answer(text) == normalised


@pytest.mark.parametrize(
    ("prediction", "answers", "score"),
    [
        ("Paris is the capital.", ["Paris"], 1.0),
        ("The answer is the Paris.", ["paris"], 1.0),
        ("Lyon\nParis", ["Paris"], 0.0),  # only the first line counts
        ("\nParis", ["Paris"], 0.0),  # the cut comes before stripping, as in the paper's code
        ("  Paris  ", ["Paris"], 1.0),
        ("New York City", ["York"], 1.0),  # a substring of the prediction
        ("York", ["New York City"], 0.0),  # but not the other way round
        ("Barack Obama", ["Obama", "Barack H. Obama"], 1.0),
        ("", ["Paris"], 0.0),
    ],
)
def test_best_subspan_em(prediction: str, answers: list[str], score: float) -> None:
    assert best_subspan_em(prediction, answers) == score


def test_substring_match_is_exact() -> None:
    value = "9f1c2d7e-1234-4abc-8def-0123456789ab"
    assert substring_match(f'The value is "{value}".', value) == 1.0
    assert substring_match(value.upper(), value) == 0.0


@pytest.mark.parametrize(
    ("prediction", "gold", "score"),
    [
        ("The total is 1,234.", 1234, 1.0),
        ("12 then 18", 18, 1.0),
        ("18 then 12", 18, 0.0),
        ("-3.5", -3.5, 1.0),
        ("no number", 3, 0.0),
    ],
)
def test_numeric_match_takes_the_last_number(prediction: str, gold: float, score: float) -> None:
    assert numeric_match(prediction, gold) == score


def test_value_recall_is_the_share_found() -> None:
    assert value_recall("1234 and 5678", ["1234", "5678", "9999", "0000"]) == 0.5
    assert value_recall("anything", []) == 0.0
