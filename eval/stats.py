"""The numbers in the report: accuracy with its standard error and 95% interval, the paired bootstrap lift
over `none`, the positional gap recovered, and latency percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
Z95 = 1.959964


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean score with its sample standard error and 95% interval."""

    value: float
    n: int
    stderr: float
    low: float
    high: float


def estimate(scores: Sequence[float]) -> Estimate:
    """Mean and standard error as lm-evaluation-harness reports them (sample std / sqrt(n)); the interval is
    Wilson's for 0/1 scores (sound at 0 and 1 and for small n), mean +/- 1.96 standard errors otherwise."""
    n = len(scores)
    if n == 0:
        return Estimate(math.nan, 0, math.nan, math.nan, math.nan)
    mean = sum(scores) / n
    stderr = float(np.std(scores, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    if all(s in (0.0, 1.0) for s in scores):
        low, high = wilson(mean, n)
    else:
        low, high = max(0.0, mean - Z95 * stderr), min(1.0, mean + Z95 * stderr)
    return Estimate(mean, n, stderr, low, high)


def wilson(p: float, n: int) -> tuple[float, float]:
    denominator = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denominator
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_bootstrap(treated: Sequence[float], baseline: Sequence[float], seed: int = 0) -> Estimate:
    """The mean paired difference (treated - baseline) and its 95% percentile interval over resampled pairs."""
    diffs = np.asarray(treated, dtype=float) - np.asarray(baseline, dtype=float)
    n = len(diffs)
    if n == 0:
        return Estimate(math.nan, 0, math.nan, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)
    stderr = float(np.std(diffs, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    return Estimate(float(diffs.mean()), n, stderr, float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


def gap_recovered(strategy_by_position: dict[int, float], baseline_by_position: dict[int, float]) -> float | None:
    """(strategy's worst - baseline's worst) / (baseline's best - baseline's worst), over the positions both
    have; None when the baseline shows no gap to recover."""
    shared = strategy_by_position.keys() & baseline_by_position.keys()
    if len(shared) < 2:
        return None
    best = max(baseline_by_position[p] for p in shared)
    worst = min(baseline_by_position[p] for p in shared)
    if best - worst <= 0:
        return None
    return (min(strategy_by_position[p] for p in shared) - worst) / (best - worst)


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan
