"""How the command line narrows the profile, and how shards split the cases."""

from __future__ import annotations

import pytest

from contextlift.eval.plan import (
    EXTRA,
    MEDOID,
    PROFILES,
    STRATEGIES,
    TASKS,
    build_cases,
    in_shard,
    make_plan,
    parse_shard,
)
from contextlift.eval.sources import Sources


def test_overrides_apply_to_every_task_or_to_the_one_named() -> None:
    plan = make_plan(
        "full",
        ["litm-qa", "litm-kv"],
        None,
        ["litm-qa=10,20", "litm-kv=75"],
        ["0%,50%,100%"],
        ["litm-qa=30", "litm-kv=10"],
        ["swim.budget=900"],
    )
    qa, kv = plan.tasks["litm-qa"], plan.tasks["litm-kv"]
    assert (qa.sizes, qa.positions, qa.samples) == ((10, 20), ("0%", "50%", "100%"), 30)
    assert (kv.sizes, kv.positions, kv.samples) == ((75,), ("0%", "50%", "100%"), 10)
    assert plan.strategies == (*STRATEGIES, MEDOID["full"], *EXTRA["full"])
    assert make_plan("quick", strategies=["none", "reorder, medoid; k=3"]).strategies == (
        "none",
        "reorder, medoid; k=3",
    )


def test_the_reference_grid_is_the_one_the_issue_asks_for() -> None:
    plan = make_plan(
        "full",
        ["litm-qa", "litm-kv"],
        None,
        ["litm-qa=10,20", "litm-kv=75"],
        ["0%,50%,100%"],
        ["litm-qa=30", "litm-kv=10"],
    )
    cases, _ = build_cases(plan, Sources())
    positions = {
        (c.task, c.size): sorted({c.position for c in cases if c.task == t and c.size == s and c.position is not None})
        for t, s in [("litm-qa", 10), ("litm-qa", 20), ("litm-kv", 75)]
        for c in cases
        if (c.task, c.size) == (t, s)
    }
    assert positions == {("litm-qa", 10): [0, 4, 9], ("litm-qa", 20): [0, 9, 19], ("litm-kv", 75): [0, 37, 74]}
    assert sum(1 for c in cases if c.task == "litm-qa" and c.variant == "standard") == 2 * 3 * 30


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"profile": "huge"}, "unknown profile"),
        ({"tasks": ["litm-qa", "nope"]}, "unknown task"),
        ({"sizes": ["ten"]}, "whole numbers"),
        ({"samples": ["0"]}, "positive"),
        ({"sizes": ["nope=10"]}, "unknown task"),
        ({"options": ["budget=10"]}, "TASK.KEY=VALUE"),
        ({"options": ["swim.budjet=10"]}, "swim has no option 'budjet' \\(it has: budget, prompt\\)"),
    ],
)
def test_bad_overrides_are_refused_with_the_reason(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message):
        make_plan(**{"profile": "quick", **kwargs})


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("swim.budget=many", "invalid literal for int"),
        ("multifact.needles=K1V4Q1,K0V1Q1", "at least 1 of each"),
        ("multifact.needles=3", "KxVyQz"),
        ("length.problems=varsum,arith", "unknown problems arith; choose varsum, gsm8k$"),
        ("length.distraction=noise", "unknown distraction noise; choose whitespace, essay$"),
        ("length.max_tokens=lots", "invalid literal for int"),
    ],
)
def test_a_bad_option_value_is_refused_before_any_case_is_built(option: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^--option '{option}': .*{message}"):
        make_plan("quick", ["litm-qa"], options=[option])


def test_every_option_default_and_profile_value_is_one_its_task_reads() -> None:
    for task in TASKS.values():
        for grid in task.profiles.values():
            for option in task.options:
                option.read(grid)
            assert set(grid.options) <= {o.name for o in task.options}


def test_shards_partition_the_cases_and_keep_a_cases_strategies_together() -> None:
    cases, _ = build_cases(make_plan("quick"), Sources())
    shards = [[c.key for c in cases if in_shard(c, (i, 3))] for i in range(3)]
    assert sorted(k for shard in shards for k in shard) == sorted(c.key for c in cases)
    assert all(shards)
    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "x/2", "1"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_every_profile_covers_every_task() -> None:
    assert all(set(grids) == set(PROFILES["quick"]) for grids in PROFILES.values())
