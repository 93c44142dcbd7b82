"""Each `scripts/reference_eval*` asks for what wrote its committed report (docs/results/NAME/run.json): the same
pipelines in the same order, each named so that it resolves today as it did on the day, the same distractor
regimes and prompt shape."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from contextlift.eval.plan import make_plan
from contextlift.eval.tasks.litm_qa import DISTRACTORS, REGIMES
from contextlift.proxy.cli import _parser
from contextlift.proxy.embedded_models import MODELS
from contextlift.strategies import build_registry, parse_selection

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(s for s in (ROOT / "scripts").glob("reference_eval*") if s.name != "reference_eval_model")
MODEL_REPORTS = sorted((ROOT / "docs" / "results" / "models").glob("*/*/run.json"))
"""scripts/reference_eval_model MODEL SHAPE wrote each of these (its arguments are the script's to compute)."""
BARE = {"reorder; order=edges-first; ranker=minilm": "reorder", "medoid; k=5; temperature=0": "medoid; k=5"}
MINILM = {
    f"reorder; order={order}; ranker=minilm": f"reorder; order={order}"
    for order in ("promote", "edges-first", "edges-last", "descending")
}
BEFORE_GATES = {
    "reorder; order=promote; ranker=lexical; gate=0": "reorder; order=promote; ranker=lexical",
    "excerpt; ranker=lexical; gate=0.12": "excerpt; ranker=lexical; min_margin=0.12",
}
"""The embedded models' first runs (docs/results/models/MODEL/SHAPE), before every ranked step stood behind a gate:
`reorder` then acted on every ranking, and excerpt's gate was its own parameter, `min_margin`."""
ON_THE_DAY = {
    "reference": BARE,
    "reference-langchain-stuff": {**BARE, "reorder; order=descending; ranker=minilm": "reorder; order=descending"},
    "reference-2": {**MINILM, "filter; ranker=minilm, reorder; ranker=minilm": "filter, reorder"},
    "reference-2-orders": MINILM,
    "reference-rankers": MINILM,
    **dict.fromkeys(("paper", "separated", "blank"), BEFORE_GATES),
}
"""Per report, the full names it wrote bare: before 2026-11-23 `reorder`'s default order was edges-first and
medoid's voting calls took the client's temperature (0), not a default of their own; before 2026-11-26 every
ranking step ranked with MiniLM, the default ranker then (lexical since)."""


def arguments(script: Path) -> list[str]:
    """The arguments the script's `exec .venv/bin/contextlift` line passes, `"$@"` left out."""
    text = script.read_text().replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if line.startswith("exec .venv/bin/contextlift ")]
    return [a for a in shlex.split(line.removeprefix("exec .venv/bin/contextlift ")) if a != "$@"]


def test_every_reference_script_is_checked() -> None:
    assert {s.name for s in SCRIPTS} >= {
        "reference_eval",
        "reference_eval_2",
        "reference_eval_orders",
        "reference_eval_rankers",
        "reference_eval_shaped",
    }


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.name)
def test_the_script_asks_for_the_committed_runs_pipelines_regimes_and_shape(script: Path) -> None:
    _asks_for_its_committed_run(arguments(script))


@pytest.mark.parametrize("run", MODEL_REPORTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_each_models_report_is_what_reference_eval_model_asks_for(run: Path) -> None:
    model, shape = run.parent.parent.name, run.parent.name
    printed = subprocess.run(
        [str(ROOT / "scripts" / "reference_eval_model"), model, shape],
        env={**os.environ, "PRINT_ARGUMENTS": "1"},
        capture_output=True,
        check=True,
    ).stdout.decode()
    arguments = printed.split("\0")[:-1]
    assert arguments[arguments.index("--local-model") + 1] == model
    assert json.loads(run.read_text())["model"] == MODELS[model].alias
    _asks_for_its_committed_run(arguments)


def _asks_for_its_committed_run(arguments: list[str]) -> None:
    args = _parser().parse_args(arguments)
    run = json.loads((ROOT / args.out / "run.json").read_text())
    bare = ON_THE_DAY.get(args.out.name, {})
    assert not set(args.strategies) & set(bare.values()), "a name that meant another pipeline on the day"
    assert [bare.get(s, s) for s in args.strategies] == run["strategies"]
    registry = build_registry()
    for strategy in args.strategies:
        registry.resolve(parse_selection(strategy), {})
    plan = make_plan(args.profile, args.tasks.split(","), args.strategies, options=args.option)
    grid = plan.tasks["litm-qa"]
    results = json.loads((ROOT / args.out / "results.json").read_text())
    variants = {row["variant"] for row in results["lift"] if row["task"] == "litm-qa"}
    assert {DISTRACTORS[regime] for regime in REGIMES.read(grid)} == variants
    assert grid.options.get("prompt", "paper") == run["tasks"]["litm-qa"].get("prompt", "paper")
