"""The registry validates a selection: known names, declared parameters, values within caps, pipeline shape."""

from __future__ import annotations

from typing import ClassVar

import pytest

from contextlift.strategies import (
    ChatRequest,
    Executor,
    Param,
    Params,
    StepContext,
    StrategyRegistry,
    StrategySelectionError,
    Transform,
    build_registry,
    parse_selection,
)
from contextlift.strategies.plugin import StrategyOutcome


class FakeTransform(Transform):
    name: ClassVar[str] = "fake-transform"
    params: ClassVar[tuple[Param, ...]] = (
        Param("order", str, "a", "an order", choices=("a", "b")),
        Param("budget", int, None, "tokens", minimum=1),
    )

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        return request


class FakeExecutor(Executor):
    name: ClassVar[str] = "fake-executor"
    params: ClassVar[tuple[Param, ...]] = (Param("k", int, 3, "calls", minimum=1, maximum=9),)

    def max_upstream_calls(self, params: Params) -> int:
        return int(params["k"])

    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        raise NotImplementedError


class OtherFakeExecutor(FakeExecutor):
    name: ClassVar[str] = "other-executor"


@pytest.fixture
def registry() -> StrategyRegistry:
    registry = build_registry()
    for strategy in (FakeTransform(), FakeExecutor(), OtherFakeExecutor()):
        registry.register(strategy)
    return registry


def resolve(registry: StrategyRegistry, text: str, caps: dict[str, float] | None = None) -> object:
    return registry.resolve(parse_selection(text), caps or {})


def test_none_is_built_in_and_empty(registry: StrategyRegistry) -> None:
    assert "none" in build_registry()
    pipeline = registry.resolve(parse_selection("none"), {})
    assert pipeline.steps == ()
    assert pipeline.label == "none"
    assert pipeline.max_upstream_calls() == 1


def test_defaults_are_filled_and_explicit_params_reported(registry: StrategyRegistry) -> None:
    pipeline = registry.resolve(parse_selection("fake-transform, fake-executor; k=5"), {})
    assert [dict(s.params) for s in pipeline.steps] == [{"order": "a"}, {"k": 5}]
    assert pipeline.label == "fake-transform, fake-executor; k=5"
    assert pipeline.max_upstream_calls() == 5


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("nope", "unknown strategy 'nope'"),
        ("fake-transform; colour=red", "no parameter 'colour'"),
        ("fake-transform; order=c", "must be one of a, b"),
        ("fake-transform; budget=lots", "must be an integer"),
        ("fake-transform; budget=0", "at least 1"),
        ("fake-executor; k=10", "at most 9"),
        ("fake-executor, other-executor", "at most one executor"),
        ("fake-executor, fake-transform", "must be the last step"),
        ("none, fake-transform", "cannot be combined"),
    ],
)
def test_invalid_selections_say_why(registry: StrategyRegistry, text: str, fragment: str) -> None:
    with pytest.raises(StrategySelectionError, match=fragment):
        resolve(registry, text)


def test_configured_cap_replaces_the_built_in_one(registry: StrategyRegistry) -> None:
    with pytest.raises(StrategySelectionError, match="at most 4"):
        resolve(registry, "fake-executor; k=5", {"fake-executor.k": 4})
    assert resolve(registry, "fake-executor; k=4", {"fake-executor.k": 4})


def test_registering_a_name_twice_is_an_error(registry: StrategyRegistry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(FakeTransform())
