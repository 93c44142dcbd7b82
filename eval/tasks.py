"""What a benchmark task declares, once, in its own module: how it reads in the report (`TaskInfo`), its grids
per profile, the `--option` keys it reads (each with its check), and how its cases are built. `eval.plan` lists
the tasks; nothing else names them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eval.cases import Case, Grid, TaskInfo
from eval.sources import Sources

Ask = Callable[[str], str]
"""Sends one prompt to the model under test (through the proxy, strategy `none`) and returns its answer."""


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a task's builder may use beside its grid: the data found, the model (SWiM generates questions with
    it) and the run's medoid strategy (SWiM's control runs it)."""

    sources: Sources
    ask: Ask | None = None
    medoid: str = "medoid; k=5"


@dataclass(frozen=True, slots=True)
class Option:
    """A `--option TASK.KEY=VALUE` key a task reads; `check` raises ValueError (the reason) for a bad value."""

    name: str
    check: Callable[[str], object] | None = None


@dataclass(frozen=True, slots=True)
class Task:
    info: TaskInfo
    profiles: Mapping[str, Grid]
    """The grid of each profile (`quick`, `full`)."""
    build: Callable[[Grid, BuildContext], tuple[list[Case], list[str]]]
    """The cases of a grid, and the notes the report must carry about where their data came from."""
    options: tuple[Option, ...] = ()

    @property
    def name(self) -> str:
        return self.info.name

    def option(self, key: str) -> Option | None:
        return next((o for o in self.options if o.name == key), None)
