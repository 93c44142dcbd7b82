"""Where each ranker's margin says it is right: the gate every ranked step stands behind, chosen per ranker.

A ranked step (`reorder`, `filter`, `focus`, `excerpt`, a plugin's) acts only where its ranker's margin (the first
document's lead over the second, as a share of its lead over the last) is at least the ranker's gate; below it the
step does nothing. The cases are filter_margins.py's: litm-qa, 10 documents, easy, hard and SQuAD distractors, each
as passages and as LangChain's `---`-joined chunks of real paragraphs, the gold first, in the middle or last in turn,
ranked as the proxy ranks them. No model answers: what is measured is whether the ranker put the gold first.

A move or a quotation of the wrong document is what costs accuracy (a near miss moved in front of the gold took
SmolLM2's first position from 1.00 to 0.10), so the gate bounds how often the step acts on a wrong ranking: per
ranker, the lowest margin on the grid at which, in every regime, the cases where the step would act with a wrong
document first are at most `WRONG_OPENS` of the regime's cases. It is chosen on the questions of even sample number
and checked on the odd ones, which it was not chosen on. `client` (the order sent) has no gate: its margin is the
same for every request and says nothing; the client's order is the client's claim.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/ranker_gates.py --data ../shared/data --out docs/results/ranker-gates

writes README.md and gates.json there; `--scores FILE` keeps the rankings and reads them back when it exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from filter_margins import REGIMES, Scored, preamble, rank_all

from contextlift.strategies.rankers import ranker_margin

GATED = ("lexical", "minilm", "fusion")
GRID = tuple(round(0.02 * i, 2) for i in range(0, 41))
WRONG_OPENS = 0.05
"""The most cases of a regime in which a gated step may act on a ranking with a wrong document first."""


def cases_of(scored: Sequence[Scored], ranker: str, regime: str, parity: int) -> list[tuple[float, bool]]:
    """(margin, the gold ranked first) per case of that ranker, regime and sample parity, where the ranker ranked."""
    found = []
    for s in scored:
        if s.ranker != ranker or s.regime != regime or s.sample % 2 != parity or s.fallback is not None:
            continue
        margin = ranker_margin(s.scores)
        if margin is not None:
            found.append((margin, s.ranking().order()[0] == s.gold))
    return found


def opens(cases: Sequence[tuple[float, bool]], gate: float) -> dict[str, Any]:
    """How often a step behind `gate` acts, and acts on a wrong first document, of the cases."""
    acting = [right for margin, right in cases if margin >= gate]
    wrong = sum(1 for right in acting if not right)
    return {"n": len(cases), "acts": len(acting), "right": len(acting) - wrong, "wrong": wrong}


def auc(cases: Sequence[tuple[float, bool]]) -> float | None:
    """The chance that a case where the ranker is right has a higher margin than one where it is wrong (ties half)."""
    right = [m for m, r in cases if r]
    wrong = [m for m, r in cases if not r]
    if not right or not wrong:
        return None
    wins = sum((a > b) + 0.5 * (a == b) for a in right for b in wrong)
    return wins / (len(right) * len(wrong))


def choose(scored: Sequence[Scored]) -> dict[str, float]:
    """Per ranker, the lowest gate on the grid that keeps wrong acts within WRONG_OPENS in every regime, on the
    even questions."""
    chosen = {}
    for ranker in GATED:
        tuning = {regime: cases_of(scored, ranker, regime, 0) for regime in REGIMES}
        chosen[ranker] = next(
            g for g in GRID if all(opens(cases, g)["wrong"] <= WRONG_OPENS * len(cases) for cases in tuning.values())
        )
    return chosen


def judged(scored: Sequence[Scored], gates: dict[str, float]) -> list[dict[str, Any]]:
    rows = []
    for ranker, gate in gates.items():
        for regime in REGIMES:
            for half, parity in (("chosen on", 0), ("checked on", 1)):
                cases = cases_of(scored, ranker, regime, parity)
                ungated = opens(cases, 0.0)
                rows.append(
                    {"ranker": ranker, "gate": gate, "regime": regime, "half": half, "auc": auc(cases),
                     "gated": opens(cases, gate), "ungated": ungated}
                )  # fmt: skip
    return rows


def render(rows: Sequence[dict[str, Any]], gates: dict[str, float], intro: str) -> str:
    lines = ["# The ranker gates: where a ranked step acts", "", intro, ""]
    lines += ["| ranker | gate |", "|---|---|", *(f"| {r} | {g:.2f} |" for r, g in gates.items()), ""]
    lines += [
        "Each cell: the cases where the step acts / the cases, and of those where it acts, how many with a wrong "
        "document first; ungated, every case acts. AUC: how well the margin tells a right first document from a "
        "wrong one in that regime (0.5: not at all).",
        "",
        "| ranker | regime | half | gated: acts / n, wrong | ungated: wrong | AUC |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        g, u = r["gated"], r["ungated"]
        shown = "-" if r["auc"] is None else f"{r['auc']:.2f}"
        lines.append(
            f"| {r['ranker']} | {r['regime']} | {r['half']} | {g['acts']}/{g['n']}, {g['wrong']} wrong | "
            f"{u['wrong']}/{u['n']} wrong | {shown} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the benchmark data folder (../shared/data)")
    parser.add_argument("--out", type=Path, required=True, help="folder for README.md and gates.json")
    parser.add_argument("--samples", type=int, default=90, help="questions per regime (default 90)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scores", type=Path, help="keep the rankings here, and read them back when it exists")
    args = parser.parse_args(argv)
    if args.scores is not None and args.scores.exists():
        scored = [Scored(**row) for row in json.loads(args.scores.read_text(encoding="utf-8"))]
    else:
        scored = asyncio.run(rank_all(args.samples, args.data, args.seed))
        if args.scores is not None:
            args.scores.write_text(json.dumps([asdict(s) for s in scored]), encoding="utf-8")
    gates = choose(scored)
    rows = judged(scored, gates)
    intro = "\n".join(
        [
            (__doc__ or "").split("\n\n")[1].replace("\n", " "),
            "",
            (__doc__ or "").split("\n\n")[2].replace("\n", " "),
            "",
            preamble(args.samples, args.seed, args.data).split("\n\n")[0],
            "",
            "Written by this command, run from the project's root (MiniLM on the CPU, in fp32; `HF_HUB_OFFLINE=1`):",
            "",
            "```bash",
            f"HF_HUB_OFFLINE=1 .venv/bin/python scripts/ranker_gates.py --data {args.data} --out {args.out} "
            f"--samples {args.samples} --seed {args.seed}",
            "```",
            "",
            f"The gate is {WRONG_OPENS:.0%} of wrong acts per regime at most, on the even questions; "
            "`strategies/rankers/gate.py` holds the result (`GATES`), and a test checks it against gates.json.",
        ]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "README.md").write_text(render(rows, gates, intro), encoding="utf-8")
    (args.out / "gates.json").write_text(json.dumps({"gates": gates, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(gates))
    return 0


if __name__ == "__main__":
    sys.exit(main())
