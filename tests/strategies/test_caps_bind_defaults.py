"""An operator's cap binds a strategy's defaults too: a request that sets nothing gets the default lowered to
the cap, not a default above it."""

from __future__ import annotations

import pytest

from contextlift.strategies import StrategySelectionError, build_registry, parse_selection

CAPS = {"medoid.k": 2, "recite.max_tokens": 64}


def test_a_default_above_the_cap_is_lowered_to_it() -> None:
    registry = build_registry()
    medoid = registry.resolve(parse_selection("medoid"), CAPS)
    recite = registry.resolve(parse_selection("recite"), CAPS)
    assert medoid.max_upstream_calls() == 2
    assert medoid.steps[0].params["k"] == 2
    assert recite.steps[0].params["max_tokens"] == 64
    assert medoid.label == "medoid"  # the request still asked for nothing


def test_a_default_within_the_cap_is_kept() -> None:
    pipeline = build_registry().resolve(parse_selection("medoid"), {"medoid.k": 7})
    assert pipeline.max_upstream_calls() == 5


def test_a_request_can_still_ask_for_less_than_the_cap() -> None:
    pipeline = build_registry().resolve(parse_selection("medoid; k=1"), CAPS)
    assert pipeline.max_upstream_calls() == 1


def test_an_integer_parameter_gets_the_whole_part_of_a_fractional_cap() -> None:
    step = build_registry().resolve(parse_selection("fact"), {"fact.rounds": 2.5}).steps[0]
    assert step.params["rounds"] == 2
    assert isinstance(step.params["rounds"], int)


def test_a_cap_below_the_minimum_says_so() -> None:
    with pytest.raises(StrategySelectionError, match="cap of 0, below its minimum of 1"):
        build_registry().resolve(parse_selection("medoid"), {"medoid.k": 0})
