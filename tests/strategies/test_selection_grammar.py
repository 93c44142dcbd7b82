"""The `X-Context-Strategy` grammar: steps separated by commas, parameters by semicolons."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextlift.strategies import StepRequest, StrategySelectionError, parse_selection


def test_steps_and_parameters() -> None:
    assert parse_selection(" reorder; order = edges-last ,medoid; k=5;seed=7") == [
        StepRequest("reorder", {"order": "edges-last"}),
        StepRequest("medoid", {"k": "5", "seed": "7"}),
    ]


@pytest.mark.parametrize(
    "text",
    ["", "  ", "a,,b", "medoid; k", "medoid; k=", "medoid; =5", "medoid; k=1=2", "Medoid", "m; k=1; k=2", "x" * 2000],
)
def test_malformed_selections_are_rejected(text: str) -> None:
    with pytest.raises(StrategySelectionError):
        parse_selection(text)


names = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
values = st.from_regex(r"[A-Za-z0-9.\-]{1,8}", fullmatch=True)
steps = st.builds(StepRequest, names, st.dictionaries(names, values, max_size=3))


@given(st.lists(steps, min_size=1, max_size=4))
def test_written_selections_parse_back(written: list[StepRequest]) -> None:
    text = ", ".join(s.name + "".join(f"; {k}={v}" for k, v in s.params.items()) for s in written)
    assert parse_selection(text) == written


@given(st.text(max_size=60))
def test_any_text_parses_or_raises_the_selection_error(text: str) -> None:
    with contextlib.suppress(StrategySelectionError):
        parse_selection(text)
