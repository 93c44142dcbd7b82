"""What a benchmark task declares, once, in its own module: how it reads in the report (`TaskInfo`), its grids
per profile, the `--option` keys it reads (each with its default and how its value is read), and how its cases
are built. `contextlift.eval.plan` lists the tasks; nothing else names them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from contextlift.eval.cases import Case, Grid, TaskInfo
from contextlift.eval.sources import Sources

Ask = Callable[[str], str]
"""Sends one prompt to the model under test (through the proxy, strategy `none`) and returns its answer."""
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a task's builder may use beside its grid: the data found, the model (SWiM generates questions with
    it) and the run's medoid strategy (SWiM's control runs it)."""

    sources: Sources
    ask: Ask | None = None
    medoid: str = "medoid; k=5"


@dataclass(frozen=True, slots=True)
class Option(Generic[T]):
    """A `--option TASK.KEY=VALUE` key a task reads."""

    name: str
    default: str
    """The value when neither the profile's grid nor `--option` gives one."""
    parse: Callable[[str], T]
    """The value as the builder uses it; raises ValueError (the reason) for a bad one, so that `--option` refuses
    it before any case is built."""

    def read(self, grid: Grid) -> T:
        """This option's value in `grid` (else the default), parsed."""
        return self.parse(grid.options.get(self.name, self.default))


@dataclass(frozen=True, slots=True)
class Task:
    """One benchmark task, declared whole: adding a task is one module exporting one of these and one entry in
    `contextlift.eval.plan.TASKS`."""

    info: TaskInfo
    profiles: Mapping[str, Grid]
    """The grid of each profile (`quick`, `full`)."""
    build: Callable[[Grid, BuildContext], tuple[list[Case], list[str]]]
    """The cases of a grid, and the notes the report must carry about where their data came from."""
    options: tuple[Option[Any], ...] = ()

    @property
    def name(self) -> str:
        return self.info.name

    def option(self, key: str) -> Option[Any] | None:
        return next((o for o in self.options if o.name == key), None)
