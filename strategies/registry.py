"""The registry: strategies by name, loaded from the `contextlift.strategies` entry-point group (the built-ins
included, published in pyproject.toml like any plugin), and the resolution of a selection into a `Pipeline`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points

from contextlift.strategies.pipeline import Pipeline, Step
from contextlift.strategies.plugin import (
    FORMAT_PARAM,
    GATE_PARAM,
    RANKER_PARAM,
    Param,
    Params,
    ParamValue,
    Role,
    Strategy,
    Transform,
)
from contextlift.strategies.rankers.base import published_rankers
from contextlift.strategies.selection import StepRequest, StrategySelectionError, parse_selection

ENTRY_POINT_GROUP = "contextlift.strategies"


def build_registry() -> StrategyRegistry:
    """A registry of every strategy published under the entry-point group, the built-ins among them."""
    registry = StrategyRegistry()
    registry.load_entry_points()
    return registry


class StrategyRegistry:
    """Strategies by name. Resolves a parsed selection into a validated `Pipeline`."""

    def __init__(self) -> None:
        self._strategies: dict[str, Strategy] = {}
        self.rankers: frozenset[str] | None = None
        """The ranker names a `ranker=` parameter may take; None: the published (built-in and plugin) rankers.
        The proxy sets it to those and the ones its operator configured."""
        self.unavailable_rankers: dict[str, str] = {}
        """Rankers this proxy knows but cannot run, and what they need (`minilm` without the embeddings extra):
        a step naming one is refused with that reason rather than as unknown."""

    def ranker_names(self) -> frozenset[str]:
        return self.rankers if self.rankers is not None else frozenset(published_rankers())

    def register(self, strategy: Strategy) -> None:
        """Add a strategy; a second one under the same name is an error."""
        if strategy.name in self._strategies:
            raise ValueError(f"a strategy named {strategy.name!r} is already registered")
        self._strategies[strategy.name] = strategy

    def load_entry_points(self) -> None:
        """Register every strategy class published under the `contextlift.strategies` entry-point group.

        Raises:
            ValueError: two published strategies share a name (a plugin cannot shadow a built-in).
        """
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            self.register(entry.load()())

    def names(self) -> list[str]:
        return sorted(self._strategies)

    def __contains__(self, name: object) -> bool:
        return name in self._strategies

    def get(self, name: str) -> Strategy:
        return self._strategies[name]

    def step_that_adds(self, selection: str, caps: Mapping[str, float]) -> tuple[Transform, Params] | None:
        """The one step `selection` names (`excerpt`, `focus; top=2`), for where a move cannot run: resolved as a
        request's would be, its defaults bound by `caps`; None for `none`.

        Raises:
            StrategySelectionError: the selection is malformed, names more than one step, or a step that does not
                only add beside a context it may not move (`reads_unmovable`, moving nothing).
        """
        steps = self.resolve(parse_selection(selection), caps).steps
        if not steps:
            return None
        strategy = steps[0].strategy
        if len(steps) > 1 or not isinstance(strategy, Transform) or not strategy.reads_unmovable or strategy.moves:
            raise StrategySelectionError(f"{selection!r} is not one step that adds beside a context it may not move")
        return strategy, steps[0].params

    def resolve(self, requests: Iterable[StepRequest], caps: Mapping[str, float]) -> Pipeline:
        """Validate a selection against the registered strategies and the configured caps.

        `caps` maps `strategy.param` to the highest value a request may ask for, overriding built-in caps.

        Raises:
            StrategySelectionError: unknown strategy or parameter, malformed or out-of-range value, `none`
                combined with other steps, more than one executor, an executor that is not last, or a step that
                needs documents after one that writes them into the prompt's text.
        """
        steps: list[Step] = []
        for request in requests:
            if request.name not in self._strategies:
                known = ", ".join(self.names())
                raise StrategySelectionError(f"unknown strategy {request.name!r}; known strategies: {known}")
            strategy = self._strategies[request.name]
            params = _typed_params(strategy, request.params, caps)
            ranker = params.get("ranker")
            if isinstance(ranker, str) and ranker in self.unavailable_rankers:
                raise StrategySelectionError(f"{strategy.name}: ranker {ranker!r} {self.unavailable_rankers[ranker]}")
            if ranker is not None and ranker not in self.ranker_names():
                known = ", ".join(sorted(self.ranker_names()))
                raise StrategySelectionError(f"{strategy.name}: unknown ranker {ranker!r}; known rankers: {known}")
            steps.append(Step(strategy, params, tuple(request.params)))
        return _ordered_pipeline(steps)


def _typed_params(strategy: Strategy, given: Mapping[str, str], caps: Mapping[str, float]) -> dict[str, ParamValue]:
    accepted = (*strategy.params, FORMAT_PARAM) if strategy.needs_documents else strategy.params
    if strategy.ranks:
        accepted = (*accepted, RANKER_PARAM, GATE_PARAM)
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
    passing = [s for s in steps if s.strategy.passes_through]
    if passing:
        if len(steps) > 1:
            raise StrategySelectionError(f"{passing[0].strategy.name!r} cannot be combined with other strategies")
        return Pipeline()
    executors = [s for s in steps if s.strategy.role is Role.EXECUTOR]
    if len(executors) > 1:
        names = ", ".join(s.strategy.name for s in executors)
        raise StrategySelectionError(f"at most one executor strategy per request, got {names}")
    if executors and steps[-1] is not executors[0]:
        raise StrategySelectionError(f"executor strategy {executors[0].strategy.name!r} must be the last step")
    _check_documents_remain(steps)
    return Pipeline(tuple(steps))


def _check_documents_remain(steps: list[Step]) -> None:
    """Refuse a step that needs documents after one that wrote them into the prompt's text (`repeat`): it would
    find none, and be passed over without a word."""
    writer: Step | None = None
    for step in steps:
        if writer is not None and (step.strategy.needs_documents or step.strategy.reads_unmovable):
            earlier, later = writer.strategy.name, step.strategy.name
            remedy = f"put {earlier!r} after it" if step.strategy.role is Role.TRANSFORM else "run them apart"
            raise StrategySelectionError(
                f"{later!r} needs the documents, and {earlier!r} before it writes them into the prompt's text, "
                f"where no later step can find them: {remedy}"
            )
        if not step.strategy.keeps_documents:
            writer = step
