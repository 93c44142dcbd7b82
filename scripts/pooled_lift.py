"""Each pipeline's paired lift over `none`, pooled over the regimes of one or more eval reports: the cases of every
report's positional variants (the closed-book and oracle rows left out), each pipeline's score paired with `none`'s on
the same case, McNemar's exact test and Newcombe's interval on the pool, Holm's correction over the pipelines.

    .venv/bin/python scripts/pooled_lift.py docs/results/reference-filter docs/results/reference-filter-chunks

prints one row per pipeline (and per report's variant, with `--per-variant`).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from contextlift.eval.verdicts.stats import holm, paired_lift

UNPAIRED = {"closed-book", "oracle"}
"""Variants asked of `none` alone (the model without documents, and with the gold alone)."""
REASKED = "none (re-asked)"
"""The A/A floor's answers: the report's own table gives them."""


def scores(folders: list[Path]) -> dict[str, dict[tuple[str, str], float]]:
    """Per pipeline, each case's score, keyed by (report, case)."""
    found: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for folder in folders:
        for line in (folder / "samples.jsonl").read_text().splitlines():
            sample = json.loads(line)
            if sample["variant"] not in UNPAIRED and sample["error"] is None and sample["strategy"] != REASKED:
                found[sample["strategy"]][(folder.name, sample["case"])] = float(sample["score"])
    return found


def rows(folders: list[Path], per_variant: bool) -> list[str]:
    by_strategy = scores(folders)
    baseline = by_strategy.pop("none")
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for strategy, cases in by_strategy.items():
        for key, score in cases.items():
            if key in baseline:
                variant = f"{key[0]}:{key[1].split('|')[1]}" if per_variant else "pooled"
                groups[(strategy, variant)].append((score, baseline[key]))
    lifts = {key: paired_lift([t for t, _ in pairs], [b for _, b in pairs]) for key, pairs in groups.items()}
    families: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in lifts:
        families[key[1]].append(key)
    out = ["| pipeline | regimes | n | lift | 95% CI | wins/losses | p | p (Holm) |", "|---" * 8 + "|"]
    for variant, keys in sorted(families.items()):
        adjusted = holm([lifts[k].p for k in keys])
        for key, p_holm in zip(keys, adjusted, strict=True):
            lift = lifts[key]
            out.append(
                f"| `{key[0]}` | {variant} | {lift.n} | {lift.value:+.3f} | [{lift.low:+.3f}, {lift.high:+.3f}] | "
                f"{lift.wins}/{lift.losses} | {lift.p:.2g} | {p_holm:.2g} /{len(keys)} |"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="eval report folders (each with its samples.jsonl)")
    parser.add_argument("--per-variant", action="store_true", help="one row per report's variant as well")
    args = parser.parse_args()
    print("\n".join(rows(args.reports, per_variant=False)))
    if args.per_variant:
        print("\n".join(["", *rows(args.reports, per_variant=True)]))


if __name__ == "__main__":
    main()
