"""Strategies as plugins: the base classes, their parameters, and the registry that resolves a selection.

A strategy is a class with a `name`, a `role` (transform or executor), declared parameters and capability
flags. The built-in strategies register exactly as a third-party one would, either by calling
`StrategyRegistry.register` or through the `contextlift.strategies` entry-point group.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, ClassVar

from strategies.selection import StepRequest, StrategySelectionError

if TYPE_CHECKING:
    from strategies.pipeline import StepContext, StrategyOutcome
    from strategies.request import ChatRequest

ENTRY_POINT_GROUP = "contextlift.strategies"

ParamValue = int | float | str
Params = Mapping[str, ParamValue]


class Role(StrEnum):
    """What a strategy does in a pipeline."""

    TRANSFORM = "transform"
    """Changes the request; any number of them run in order."""
    EXECUTOR = "executor"
    """Decides how the upstream is called; at most one, last."""


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter a strategy accepts in its step, e.g. `k` in `medoid; k=5`."""

    name: str
    kind: type[int] | type[float] | type[str]
    default: ParamValue | None
    description: str
    minimum: float | None = None
    maximum: float | None = None
    """The built-in cap; operators may set another in settings, and a request can only go below it. A default
    above the cap in force is lowered to it."""
    choices: tuple[str, ...] = ()

    def parse(self, text: str, cap: float | None) -> ParamValue:
        """The typed value of `text`, checked against choices, minimum and `cap`.

        Raises:
            ValueError: the value is malformed or out of range.
        """
        if self.kind is str:
            if self.choices and text not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            return text
        try:
            value: int | float = int(text) if self.kind is int else float(text)
        except ValueError:
            raise ValueError(f"must be {'an integer' if self.kind is int else 'a number'}, got {text!r}") from None
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {_number(self.minimum)}, got {text}")
        if cap is not None and value > cap:
            raise ValueError(f"must be at most {_number(cap)} (the configured cap), got {text}")
        return value

    def default_within(self, cap: float | None) -> ParamValue | None:
        """The default, lowered to `cap` when it is above it: an operator's cap binds what a request gets
        without asking as much as what it asks for.

        Raises:
            ValueError: the cap is below the minimum, so no value is allowed at all.
        """
        default = self.default
        if cap is None or default is None or isinstance(default, str) or default <= cap:
            return default
        lowered = math.floor(cap) if self.kind is int else cap
        if self.minimum is not None and lowered < self.minimum:
            raise ValueError(f"has a configured cap of {_number(cap)}, below its minimum of {_number(self.minimum)}")
        return lowered


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


FORMAT_PARAM = Param(
    "format",
    str,
    None,
    "the shape to read the request's documents in (a built-in shape, or a format the operator declared); "
    "unset: detected",
)
"""Accepted by every strategy that needs documents: a request that knows its prompt's shape names it."""


class Strategy(ABC):
    """Base of every strategy. Subclass `Transform` or `Executor`, not this."""

    name: ClassVar[str]
    role: ClassVar[Role]
    params: ClassVar[tuple[Param, ...]] = ()
    needs_documents: ClassVar[bool] = True
    """Whether the strategy does anything for a request without detected documents."""
    streams_directly: ClassVar[bool] = True
    """Whether its last upstream call can stream straight through to the client."""
    needs_embedder: ClassVar[bool] = False
    """Whether it uses `Services.embedder` (which then must be loaded before it runs)."""
    answers_n: ClassVar[bool] = True
    """Whether it gives the `n` choices a client asks for. An executor that makes one answer sets False, and a
    request with `n` > 1 is then refused with a 400 naming `n` rather than answered with fewer choices."""

    def max_upstream_calls(self, params: Params) -> int:
        """The most upstream calls this step can make (retries aside); 0 for transforms."""
        return 0


class Transform(Strategy):
    """A strategy that rewrites the request before it is sent."""

    role: ClassVar[Role] = Role.TRANSFORM

    @abstractmethod
    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        """The rewritten request."""


class Executor(Strategy):
    """A strategy that decides how the upstream is called and what the client gets back."""

    role: ClassVar[Role] = Role.EXECUTOR

    def max_upstream_calls(self, params: Params) -> int:
        return 1

    @abstractmethod
    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        """Call the upstream through `context.upstream` and return what the client gets."""


@dataclass(frozen=True, slots=True)
class Step:
    """One resolved step of a pipeline: a strategy with typed parameters (defaults filled in)."""

    strategy: Strategy
    params: Mapping[str, ParamValue]
    explicit: tuple[str, ...] = ()
    """Names of the parameters the request set, for reporting the step as it was asked."""

    @property
    def label(self) -> str:
        """The step as written in `X-Context-Strategy`."""
        shown = "".join(f"; {name}={self.params[name]}" for name in self.explicit)
        return f"{self.strategy.name}{shown}"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Transforms followed by at most one executor. Empty means: send the request once, untouched."""

    steps: tuple[Step, ...] = ()

    @property
    def transforms(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.strategy.role is Role.TRANSFORM)

    @property
    def executor(self) -> Step | None:
        return next((s for s in self.steps if s.strategy.role is Role.EXECUTOR), None)

    @property
    def label(self) -> str:
        return ", ".join(s.label for s in self.steps) or "none"

    @property
    def shape(self) -> str | None:
        """The document shape the steps named with `format=`, if any (one, checked at resolution)."""
        return next((str(s.params["format"]) for s in self.steps if "format" in s.params), None)

    @property
    def needs_embedder(self) -> bool:
        return any(s.strategy.needs_embedder for s in self.steps)

    @property
    def streams_directly(self) -> bool:
        executor = self.executor
        return executor is None or executor.strategy.streams_directly

    def max_upstream_calls(self) -> int:
        """The most upstream calls the pipeline makes for one request, before retries."""
        executor = self.executor
        return executor.strategy.max_upstream_calls(executor.params) if executor else 1


class StrategyRegistry:
    """Strategies by name. Resolves a parsed selection into a validated `Pipeline`."""

    def __init__(self) -> None:
        self._strategies: dict[str, Strategy] = {}

    def register(self, strategy: Strategy) -> None:
        """Add a strategy; a second one under the same name is an error."""
        if strategy.name in self._strategies:
            raise ValueError(f"a strategy named {strategy.name!r} is already registered")
        self._strategies[strategy.name] = strategy

    def load_entry_points(self) -> None:
        """Register every strategy class published under the `contextlift.strategies` entry-point group."""
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            if entry.name not in self._strategies:
                self.register(entry.load()())

    def names(self) -> list[str]:
        return sorted(self._strategies)

    def __contains__(self, name: object) -> bool:
        return name in self._strategies

    def get(self, name: str) -> Strategy:
        return self._strategies[name]

    def resolve(self, requests: Iterable[StepRequest], caps: Mapping[str, float]) -> Pipeline:
        """Validate a selection against the registered strategies and the configured caps.

        `caps` maps `strategy.param` to the highest value a request may ask for, overriding built-in caps.

        Raises:
            StrategySelectionError: unknown strategy or parameter, malformed or out-of-range value, `none`
                combined with other steps, more than one executor, or an executor that is not last.
        """
        steps: list[Step] = []
        for request in requests:
            if request.name not in self._strategies:
                known = ", ".join(self.names())
                raise StrategySelectionError(f"unknown strategy {request.name!r}; known strategies: {known}")
            strategy = self._strategies[request.name]
            steps.append(Step(strategy, _typed_params(strategy, request.params, caps), tuple(request.params)))
        return _ordered_pipeline(steps)


def _typed_params(strategy: Strategy, given: Mapping[str, str], caps: Mapping[str, float]) -> dict[str, ParamValue]:
    accepted = (*strategy.params, FORMAT_PARAM) if strategy.needs_documents else strategy.params
    declared = {p.name: p for p in accepted}
    values: dict[str, ParamValue] = {}
    for name, text in given.items():
        if name not in declared:
            names = ", ".join(declared) or "none"
            raise StrategySelectionError(f"strategy {strategy.name!r} has no parameter {name!r}; it accepts: {names}")
        try:
            values[name] = declared[name].parse(text, _cap(strategy, declared[name], caps))
        except ValueError as error:
            raise StrategySelectionError(f"{strategy.name}: {name} {error}") from None
    for param in accepted:
        if param.name in given:
            continue
        try:
            default = param.default_within(_cap(strategy, param, caps))
        except ValueError as error:
            raise StrategySelectionError(f"{strategy.name}: {param.name} {error}") from None
        if default is not None:
            values[param.name] = default
    return values


def _cap(strategy: Strategy, param: Param, caps: Mapping[str, float]) -> float | None:
    return caps.get(f"{strategy.name}.{param.name}", param.maximum)


def _ordered_pipeline(steps: list[Step]) -> Pipeline:
    shapes = {s.params["format"] for s in steps if "format" in s.params}
    if len(shapes) > 1:
        raise StrategySelectionError(f"steps name different formats: {', '.join(sorted(map(str, shapes)))}")
    if any(s.strategy.name == "none" for s in steps):
        if len(steps) > 1:
            raise StrategySelectionError("'none' cannot be combined with other strategies")
        return Pipeline()
    executors = [s for s in steps if s.strategy.role is Role.EXECUTOR]
    if len(executors) > 1:
        names = ", ".join(s.strategy.name for s in executors)
        raise StrategySelectionError(f"at most one executor strategy per request, got {names}")
    if executors and steps[-1] is not executors[0]:
        raise StrategySelectionError(f"executor strategy {executors[0].strategy.name!r} must be the last step")
    return Pipeline(tuple(steps))
