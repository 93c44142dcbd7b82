"""Shadow evaluation scored against the truth: captured shadow records (CONTEXTLIFT_SHADOW_CAPTURE=true) of
requests an eval run sent as live traffic, matched to that run's samples by prompt hash and scored with the
eval's own metric. Prints, on the same cases, the served answer's accuracy, each candidate's, its paired lift
with a 95% interval, and the position-sensitive share by gold position; `scripts/shadow_live` runs it.

    .venv/bin/python scripts/shadow_vs_eval.py --sink SINK --samples EVAL_OUT/samples.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import defaultdict
from pathlib import Path

from contextlift.eval.metrics import best_subspan_em
from contextlift.eval.sinks import sink_records
from contextlift.eval.verdicts.stats import estimate, paired_bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sink", type=Path, required=True)
    parser.add_argument("--samples", type=Path, required=True)
    args = parser.parse_args()
    cases = {}
    for line in args.samples.read_text().splitlines():
        sample = json.loads(line)
        if sample["strategy"] == "none" and sample["position"] is not None:
            cases[sample["prompt_hash"]] = sample
    served: list[float] = []
    candidates: dict[str, list[float]] = defaultdict(list)
    sensitive_by_position: dict[int, list[float]] = defaultdict(list)
    for record in sink_records(args.sink):
        captured = record.get("captured")
        if not captured:
            continue
        prompt = captured["body"]["messages"][-1]["content"]
        sample = cases.get(hashlib.sha256(prompt.encode()).hexdigest()[:16])
        if sample is None:
            continue
        served.append(best_subspan_em(captured["served"], sample["gold"]))
        for row, answer in zip(record["candidates"], captured["answers"], strict=False):
            candidates[row["strategy"]].append(best_subspan_em(answer, sample["gold"]))
        if record["position_sensitive"] is not None:
            sensitive_by_position[sample["position"]].append(float(record["position_sensitive"]))
    if not served:
        raise SystemExit("no captured record matches a sample: was CONTEXTLIFT_SHADOW_CAPTURE=true?")
    eval_none = estimate([s["score"] for s in cases.values()])
    shown = estimate(served)
    print(f"cases matched: {len(served)} of {len(cases)}")
    print(f"eval, none: {eval_none.value:.3f} [{eval_none.low:.3f}, {eval_none.high:.3f}]")
    print(f"shadow, served (none), scored: {shown.value:.3f} [{shown.low:.3f}, {shown.high:.3f}]")
    for name, scores in candidates.items():
        accuracy = estimate(scores)
        lift = paired_bootstrap(scores, served[: len(scores)])
        print(
            f"shadow, candidate {name!r}, scored: {accuracy.value:.3f}; lift over served {lift.value:+.3f} "
            f"[{lift.low:+.3f}, {lift.high:+.3f}] n={lift.n}"
        )
    for position, flags in sorted(sensitive_by_position.items()):
        share = estimate(flags)
        print(
            f"gold at {position}: position-sensitive {share.value:.3f} [{share.low:.3f}, {share.high:.3f}] n={share.n}"
        )


if __name__ == "__main__":
    main()
