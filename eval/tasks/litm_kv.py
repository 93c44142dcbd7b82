"""`litm-kv`: Lost in the Middle's key-value retrieval. A JSON object of UUID pairs, the gold pair moved to
each position, scored by the value occurring in the answer; the paper's query-aware prompt (the key before
the data too) runs beside it as a baseline with `none`, to compare with the proxy's `query-aware`."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path

from contextlift.eval.cases import Case, Grid, TaskInfo, case_rng, resolve_positions
from contextlift.eval.sources import Sources
from contextlift.eval.tasks.litm import KVExample, kv_prompt, load_kv, place_kv
from contextlift.eval.tasks.registry import Task

INFO = TaskInfo("litm-kv", "Key-value retrieval (Lost in the Middle)", "pairs", "gold pair index", "substring")
MAX_TOKENS = 64
"""A UUID is about 25 tokens."""
_PAPER_POSITIONS = {75: [0, 24, 49, 74], 140: [0, 34, 69, 104, 139], 300: [0, 49, 99, 149, 199, 249, 299]}


def paper_positions(pairs: int) -> list[int]:
    """The paper's gold positions for 75, 140 and 300 pairs; first, quarters and last for other sizes."""
    return _PAPER_POSITIONS.get(pairs) or sorted({round(q * (pairs - 1)) for q in (0, 0.25, 0.5, 0.75, 1)})


@functools.cache
def _load(path: Path) -> list[KVExample]:
    return load_kv(path)


def generated_example(seed: int, pairs: int, sample: int) -> KVExample:
    """The paper's format with fresh UUIDs: `pairs` records, the gold the first of them."""
    rng = case_rng(seed, INFO.name, pairs, sample)
    records = tuple(
        (str(uuid.UUID(int=rng.getrandbits(128), version=4)), str(uuid.UUID(int=rng.getrandbits(128), version=4)))
        for _ in range(pairs)
    )
    return KVExample(records, records[0][0], records[0][1])


def build(grid: Grid, sources: Sources) -> tuple[list[Case], list[str]]:
    cases: list[Case] = []
    notes: list[str] = []
    for size in grid.sizes:
        path = sources.kv_file(size)
        rows = _load(path) if path else None
        if rows is None:
            notes.append(f"litm-kv: {size} pairs generated in the paper's format (fresh UUIDs).")
        positions = resolve_positions(grid.positions, size, indexed=True) if grid.positions else paper_positions(size)
        order = case_rng(grid.seed, INFO.name, "row").sample(range(len(rows)), len(rows)) if rows else []
        for sample in range(grid.samples):
            example = rows[order[sample % len(rows)]] if rows else generated_example(grid.seed, size, sample)
            for position in positions:
                records = place_kv(example, position)
                for variant, query_aware in (("standard", False), ("query-aware prompt", True)):
                    cases.append(
                        Case(
                            INFO.name,
                            variant,
                            size,
                            position,
                            sample,
                            kv_prompt(records, example.key, query_aware=query_aware),
                            (example.value,),
                            INFO.metric,
                            MAX_TOKENS,
                            strategies=("none",) if query_aware else None,
                        )
                    )
    return cases, notes


TASK = Task(
    INFO,
    {
        # quick: 8 pairs, few enough for the quick profile's 15 minutes (plan.PROFILES): UUIDs are the embedded model's
        # costliest text, and three gold positions still stand apart.
        "quick": Grid((8,), ("0%", "50%", "100%"), 1),
        "full": Grid((75, 140, 300), (), 100),
    },
    lambda grid, context: build(grid, context.sources),
)
