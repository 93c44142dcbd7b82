"""The benchmark's tasks, its two profiles, and how the command line narrows them: which cases a run sends."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from contextlift.eval.cases import Case, Grid
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import length, litm_kv, litm_qa, multifact, swim
from contextlift.eval.tasks.prompt_shapes import PROMPT
from contextlift.eval.tasks.registry import Ask, BuildContext, Task

TASKS: dict[str, Task] = {t.name: t for t in (litm_qa.TASK, litm_kv.TASK, swim.TASK, length.TASK, multifact.TASK)}
"""Every task, in the report's order; each declares itself in its own module."""
STRATEGIES = ("none", "reorder", "filter, reorder", "query-aware", "recite", "fact")
PROFILE_NAMES = ("quick", "full")
PROFILES: dict[str, dict[str, Grid]] = {
    profile: {name: task.profiles[profile] for name, task in TASKS.items()} for profile in PROFILE_NAMES
}
"""quick: within 15 minutes on 2 idle CPU cores with the embedded 135M model, every task and every strategy, small
contexts. When `pick` joined, it would have passed them: litm-kv holds 8 pairs, swim a 400-token budget and length
its evidence-first case alone (each task's grid says why; docs/eval.md gives the arithmetic). full: the papers'
sizes, within an 8K-token context where a paper goes further (Du et al., FACT, SWiM)."""
MEDOID = {"quick": "medoid; k=3", "full": "medoid; k=5"}
EXTRA = {"quick": ("chain", "focus", "excerpt", "repeat", "pick"), "full": ()}
"""Pipelines a profile adds after medoid, in the quick profile so that every built-in strategy is tried there:
`chain` (a call per chunk; in the full profile it would multiply the calls of every long case), `focus`, `excerpt`
and `repeat`, whose papers' regimes are not these tasks', and `pick` (a second call with the whole context); name them
with --strategies for a full run."""


@dataclass(frozen=True, slots=True)
class Plan:
    tasks: dict[str, Grid]
    strategies: tuple[str, ...]


def make_plan(
    profile: str,
    tasks: Sequence[str] | None = None,
    strategies: Sequence[str] | None = None,
    sizes: Sequence[str] = (),
    positions: Sequence[str] = (),
    samples: Sequence[str] = (),
    options: Sequence[str] = (),
    seed: int = 0,
) -> Plan:
    """The profile's grids, narrowed by the command line: `sizes`, `positions` and `samples` are each
    `VALUES` for every task or `TASK=VALUES` for one (values comma-separated); `options` are `TASK.KEY=VALUE`.

    Raises:
        ValueError: an unknown task, profile or malformed override.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose {', '.join(PROFILES)}")
    chosen = list(tasks or TASKS)
    unknown = [t for t in chosen if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
    grids = {t: replace(PROFILES[profile][t], seed=seed) for t in chosen}
    for text in sizes:
        for task, values in _scoped(text, chosen):
            grids[task] = replace(grids[task], sizes=tuple(_ints(values, "sizes")))
    for text in positions:
        for task, values in _scoped(text, chosen):
            grids[task] = replace(grids[task], positions=tuple(v.strip() for v in values.split(",") if v.strip()))
    for text in samples:
        for task, values in _scoped(text, chosen):
            grids[task] = replace(grids[task], samples=_ints(values, "samples")[0])
    for text in options:
        name, _, value = text.partition("=")
        task, _, key = name.partition(".")
        if task not in TASKS or not key or not value:
            raise ValueError(f"--option {text!r}: expected TASK.KEY=VALUE, e.g. swim.budget=3000")
        option = TASKS[task].option(key)
        if option is None:
            known = ", ".join(o.name for o in TASKS[task].options) or "none"
            raise ValueError(f"--option {text!r}: {task} has no option {key!r} (it has: {known})")
        try:
            option.parse(value)
        except ValueError as error:
            raise ValueError(f"--option {text!r}: {error}") from None
        if task in grids:
            grids[task] = replace(grids[task], options={**grids[task].options, key: value})
    return Plan(grids, tuple(strategies or (*STRATEGIES, MEDOID[profile], *EXTRA[profile])))


def task_record(task: str, grid: Grid) -> dict[str, str | bool]:
    """What run.json and the report say of a task: its `TaskInfo`, and the prompt shape its cases were rendered
    in where it has the `prompt` option."""
    record: dict[str, str | bool] = dict(asdict(TASKS[task].info))
    if PROMPT in TASKS[task].options:
        record["prompt"] = grid.options.get(PROMPT.name, PROMPT.default)
    return record


def in_shard(case: Case, shard: tuple[int, int] | None) -> bool:
    """Whether the case belongs to shard `index` of `count`: by a hash of its key, so every strategy of a case
    (and so every paired comparison) lands in the same shard, whatever machine computes it."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(case.key.encode()).hexdigest()[:8], 16) % count == index


def parse_shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        shard = int(index), int(count)
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected INDEX/COUNT, e.g. 0/4") from None
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"--shard {text!r}: INDEX must be from 0 to COUNT-1")
    return shard


def _scoped(text: str, tasks: Sequence[str]) -> list[tuple[str, str]]:
    task, sep, values = text.partition("=")
    if not sep:
        return [(t, text) for t in tasks]
    if task not in TASKS:
        raise ValueError(f"{text!r}: unknown task {task!r}")
    return [(task, values)] if task in tasks else []


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--{what} {text!r}: expected whole numbers") from None
    if not values or min(values) < 0 or (what == "samples" and values[0] < 1):
        raise ValueError(f"--{what} {text!r}: expected positive whole numbers")
    return values


def build_cases(plan: Plan, sources: Sources, ask: Ask | None = None) -> tuple[list[Case], list[str]]:
    """Every case of the plan, and the notes the report must carry about where the data came from."""
    medoid = next((s for s in plan.strategies if s.split(";")[0].strip() == "medoid"), "medoid; k=5")
    context = BuildContext(sources, ask, medoid)
    cases: list[Case] = []
    notes: list[str] = []
    for task, grid in plan.tasks.items():
        built, told = TASKS[task].build(grid, context)
        cases += built
        notes += told
    return cases, notes
