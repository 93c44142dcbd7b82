"""What the report shows, as data: the samples read back, accuracy per cell with its interval, each strategy's
paired lift over `none`, the positional gap it recovers, and its cost. `eval.report.markdown` renders these."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from contextlift.eval.cases import REASKED, Sample
from contextlift.eval.metrics import AGREEMENT_METRIC
from contextlift.eval.verdicts.best_pipeline import best_pipelines
from contextlift.eval.verdicts.effective_length import effective_lengths
from contextlift.eval.verdicts.ranker_split import has_rankings, ranker_check, ranker_signal, ranker_split, signal_lift
from contextlift.eval.verdicts.stats import (
    Estimate,
    PairedLift,
    detectable_lift,
    estimate,
    gap_recovered,
    holm,
    paired_lift,
    percentile,
)

BASELINE = "none"


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the run was: shown at the head of the report."""

    model: str
    proxy: str
    strategies: tuple[str, ...]
    seed: int
    profile: str
    notes: tuple[str, ...] = ()
    tasks: dict[str, dict[str, str | bool]] = field(default_factory=dict)
    """Per task: its title, size unit and position unit, and the prompt shape for a task that has one."""
    upstreams: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each upstream that answered, by fingerprint (`eval.identity.UpstreamIdentity.to_json`); empty for a run
    from before they were recorded."""
    run: str | None = None
    """The id of the run that wrote the report (answers reused from the cache keep the run that asked them)."""


def load_samples(paths: Iterable[Path]) -> list[Sample]:
    """Samples from one or more `samples.jsonl` files (shards), each (case, strategy) once."""
    seen: dict[tuple[str, str], Sample] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                sample = Sample.of(json.loads(line))
                seen[(sample.case, sample.strategy)] = sample
    return list(seen.values())


def _group(samples: Iterable[Sample], *fields: str) -> dict[tuple[Any, ...], list[Sample]]:
    return _grouped(samples, lambda sample: tuple(getattr(sample, f) for f in fields))


def order_of(values: Iterable[Any]) -> list[Any]:
    return sorted(set(values), key=lambda v: (v is None, v))


def results(samples: Sequence[Sample], info: RunInfo) -> dict[str, Any]:
    """Everything the report shows, as data."""
    reasked = [s for s in samples if s.strategy == REASKED]
    samples = [s for s in samples if s.strategy != REASKED]
    accuracy = []
    for (task, variant, size, strategy, position), group in sorted(
        _group(samples, "task", "variant", "size", "strategy", "position").items(), key=lambda kv: _sort_key(kv[0])
    ):
        accuracy.append(
            {
                "task": task,
                "variant": variant,
                "size": size,
                "strategy": strategy,
                "position": position,
                **_estimate_dict(estimate([s.score for s in group])),
                "errors": sum(1 for s in group if s.error),
            }
        )
    floors = noise_floors(samples, reasked)
    lift = lifts(samples, {(r["task"], r["variant"]): r["floor"] for r in floors})
    # Only where the samples carry rankings: a report from before they were kept reads back as it was written.
    split: dict[str, Any] = {}
    if has_rankings(samples):
        signal = ranker_signal(samples)
        split = {
            "ranker_split": ranker_split(samples, reasked),
            "ranker_check": ranker_check(samples),
            "ranker_signal": signal,
            "signal_lift": signal_lift(samples, signal),
        }
    return {
        "run": asdict(info),
        "accuracy": accuracy,
        "noise_floor": floors,
        "lift": lift,
        "not_compared": across_upstreams(samples),
        "best_pipeline": best_pipelines(lift, info.strategies),
        "effective_length": effective_lengths(accuracy),
        "gap_recovered": gaps(samples),
        "cost": costs(samples),
        **split,
    }


def noise_floors(samples: Sequence[Sample], reasked: Sequence[Sample]) -> list[dict[str, Any]]:
    """The A/A rows: per task x variant, `none` asked again (`REASKED`) against `none`, on the cases asked twice by
    the same upstream.

    `changed` counts the cases whose score changed, `answers_changed` those whose answer text did; `floor`, the
    share of cases whose score changed, is the largest lift re-asking alone produced (every change one way). The
    verdict rule (contextlift.eval.verdicts.best_pipeline) counts a lift only when its interval clears it."""
    first = {(s.case, s.upstream): s for s in samples if s.strategy == BASELINE and s.metric != AGREEMENT_METRIC}
    rows = []
    for (task, variant), group in _group(reasked, "task", "variant").items():
        matched = [(s, first.get((s.case, s.upstream))) for s in sorted(group, key=lambda s: str(s.case))]
        pairs = [(again, once) for again, once in matched if once is not None and not again.error and not once.error]
        if not pairs:
            continue
        lift = paired_lift([again.score for again, _ in pairs], [once.score for _, once in pairs])
        rows.append(
            {
                "task": task,
                "variant": variant,
                **_lift_dict(lift),
                "changed": lift.wins + lift.losses,
                "answers_changed": sum(1 for again, once in pairs if again.answer != once.answer),
                "floor": (lift.wins + lift.losses) / lift.n,
                "runs": _runs(pairs),
            }
        )
    return sorted(rows, key=lambda r: (r["task"], r["variant"]))


def across_upstreams(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Per task x variant x strategy: the cases whose answer and `none`'s came from different upstreams, left out
    of the lift (a paired comparison across upstreams measures the upstreams as much as the strategy)."""
    base = {s.case: s.upstream for s in samples if s.strategy == BASELINE}
    rows = []
    for (task, variant, strategy), group in _group(samples, "task", "variant", "strategy").items():
        across = sum(1 for s in group if s.case in base and s.upstream != base[s.case])
        if strategy != BASELINE and across:
            rows.append({"task": task, "variant": variant, "strategy": strategy, "cases": across})
    return sorted(rows, key=lambda r: (r["task"], r["variant"], r["strategy"]))


def lifts(samples: Sequence[Sample], floors: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """Each strategy against `none` on the same cases, per task x variant x size and over all sizes.

    Each row carries the exact paired test (`wins`, `losses`, `p`), its p-value after Holm's correction over the
    strategies compared in the same task x variant x size (`p_holm`, `family`), the baseline's accuracy on the
    pairs and the smallest lift the pairs could detect (`detectable`). Only answers from the same upstream pair
    up (`upstreams` names them, `runs` counts the runs that asked); `floor` is the regime's A/A floor where it was
    measured (`noise_floors`)."""
    floors = floors or {}
    rows = []
    # An answer scored by agreement with a reference answer (a replay's served one) is not scored for being right:
    # a lift over `none` on it means nothing, and the verdict must not read one.
    scored = [s for s in samples if s.metric != AGREEMENT_METRIC]
    for (task, variant), group in _group(scored, "task", "variant").items():
        by_strategy = _group(group, "strategy")
        if (BASELINE,) not in by_strategy:
            continue
        base = {s.case: s for s in by_strategy[(BASELINE,)]}
        for (strategy,), treated in by_strategy.items():
            if strategy == BASELINE:
                continue
            sizes = order_of(s.size for s in treated)
            for size in [*sizes, None] if len(sizes) > 1 else [None]:
                # In case order: the bootstrap's draws follow the order of the pairs, and a merged or re-read
                # run must resample the same pairs as the fresh one.
                pairs = [
                    (s, base[s.case])
                    for s in sorted(treated, key=lambda s: str(s.case))
                    if s.case in base and (size is None or s.size == size) and s.upstream == base[s.case].upstream
                ]
                if pairs:
                    lift = paired_lift([t.score for t, _ in pairs], [b.score for _, b in pairs])
                    baseline = sum(b.score for _, b in pairs) / len(pairs)
                    rows.append(
                        {
                            "task": task,
                            "variant": variant,
                            "size": size,
                            "strategy": strategy,
                            **_lift_dict(lift),
                            "baseline": baseline,
                            "upstreams": sorted({b.upstream for _, b in pairs if b.upstream}),
                            "runs": _runs(pairs),
                            "floor": floors.get((task, variant)),
                        }
                    )
    for family in _group_rows(rows, "task", "variant", "size").values():
        # McNemar's power rests on how many pairs differ: the regime's observed share, over its pipelines.
        discordant = sum((r["wins"] + r["losses"]) / r["n"] for r in family) / len(family)
        for row, adjusted in zip(family, holm([r["p"] for r in family]), strict=True):
            row["p_holm"] = adjusted
            row["family"] = len(family)
            row["discordant"] = discordant
            row["detectable"] = detectable_lift(row["n"], row["baseline"], len(family), discordant)
    return rows


def _runs(pairs: Iterable[tuple[Sample, Sample]]) -> int:
    """How many runs asked the answers of `pairs` (a run from before runs were recorded counts none)."""
    return len({s.run for pair in pairs for s in pair if s.run})


def _group_rows(rows: Iterable[dict[str, Any]], *fields: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    return _grouped(rows, lambda row: tuple(row[f] for f in fields))


T = TypeVar("T")


def _grouped(items: Iterable[T], key: Callable[[T], tuple[Any, ...]]) -> dict[tuple[Any, ...], list[T]]:
    groups: dict[tuple[Any, ...], list[T]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return groups


def gaps(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """The positional gap recovered, per task x variant x size, where `none` shows a gap."""
    rows = []
    for (task, variant, size), group in _group(samples, "task", "variant", "size").items():
        by_position = {
            strategy: {p: estimate([s.score for s in g]).value for (p,), g in _group(scored, "position").items()}
            for (strategy,), scored in _group([s for s in group if s.position is not None], "strategy").items()
        }
        if BASELINE not in by_position or len(by_position[BASELINE]) < 2:
            continue
        for strategy, accuracy in by_position.items():
            if strategy != BASELINE:
                rows.append(
                    {
                        "task": task,
                        "variant": variant,
                        "size": size,
                        "strategy": strategy,
                        "value": gap_recovered(accuracy, by_position[BASELINE]),
                    }
                )
    return rows


def costs(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Per task x strategy: upstream calls, tokens and latency, and each relative to `none` on the task.

    `none` counts only the cases the other strategies also ran: its baseline-only cases (closed-book, oracle)
    have other prompts and would skew every ratio."""
    rows = []
    for (task,), group in _group(samples, "task").items():
        treated = {s.case for s in group if s.strategy != BASELINE}
        if treated:
            group = [s for s in group if s.strategy != BASELINE or s.case in treated]
        per_strategy = {}
        for (strategy,), scored in _group(group, "strategy").items():
            answered = [s for s in scored if not s.error]
            latencies = [s.latency_s for s in answered if s.latency_s is not None]
            per_strategy[strategy] = {
                "calls": _mean([s.upstream_calls for s in answered if s.upstream_calls is not None]),
                "tokens": _mean(
                    [
                        (s.prompt_tokens or 0) + (s.completion_tokens or 0)
                        for s in answered
                        if s.prompt_tokens is not None
                    ]
                ),
                "p50_s": percentile(latencies, 50),
                "p95_s": percentile(latencies, 95),
                "n": len(scored),
                "errors": len(scored) - len(answered),
                # The strategy's own report (X-Context-Strategy) of falling back to one plain call.
                "fallback_share": _mean([float("fallback" in (s.applied or "")) for s in answered]),
            }
        base = per_strategy.get(BASELINE)
        for strategy, cost in per_strategy.items():
            relative = {
                f"{k}_vs_none": _ratio(cost[k], base[k]) if base else math.nan
                for k in ("calls", "tokens", "p50_s", "p95_s")
            }
            rows.append({"task": task, "strategy": strategy, **cost, **relative})
    return rows


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _ratio(value: float, base: float) -> float:
    return value / base if base and not math.isnan(base) and not math.isnan(value) else math.nan


def _estimate_dict(value: Estimate) -> dict[str, Any]:
    return {"value": value.value, "n": value.n, "stderr": value.stderr, "ci95": [value.low, value.high]}


def _lift_dict(lift: PairedLift) -> dict[str, Any]:
    return {
        "value": lift.value,
        "n": lift.n,
        "stderr": lift.stderr,
        "ci95": [lift.low, lift.high],
        "interval": lift.interval,
        "wins": lift.wins,
        "losses": lift.losses,
        "test": lift.test,
        "p": lift.p,
    }


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, v) for v in key)
