"""The numbers in the report: accuracy with its standard error and 95% interval, the paired lift over `none`
(an exact test on the pairs that differ, Newcombe's interval for 0/1 scores, a bootstrap otherwise), Holm's
correction over the pipelines of a regime, the smallest lift a run could detect, the positional gap recovered,
and latency percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
Z95 = 1.959964
ALPHA = 0.05
"""Family-wise error rate of a regime's verdict: the chance that any pipeline is called a lift when none is."""
POWER = 0.8
"""The power at which `detectable_lift` is stated: the lift the run would find four times in five."""
MIN_DISCORDANT = 10
"""Below this many pairs that differ, no lift or loss is called significant, whatever the p-value.

The exact test alone would call 6 wins and 0 losses significant (p = 0.031): a verdict that one flipped answer
undoes (6/1: p = 0.125), and that `auto` would then apply to every request of a model. Ten is the usual floor
under which McNemar's test is said to carry too little information (b + c < 10), and at ten the most lopsided
split still needs 9 wins of 10 (p = 0.021), so a single unlucky case cannot make a rule."""


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


@dataclass(frozen=True, slots=True)
class PairedLift:
    """A paired comparison of treated against baseline scores on the same cases."""

    value: float
    """Mean difference, treated - baseline."""
    n: int
    stderr: float
    low: float
    high: float
    wins: int
    """Pairs where the treated score is higher."""
    losses: int
    """Pairs where the baseline's is higher."""
    p: float
    """Exact two-sided p-value of the sign test on `wins` against `losses` (McNemar's exact test for 0/1)."""
    test: str
    """`mcnemar-exact` for 0/1 scores, `sign-exact` otherwise."""
    interval: str
    """`newcombe` (0/1 scores) or `bootstrap`."""


def paired_lift(treated: Sequence[float], baseline: Sequence[float]) -> PairedLift:
    """The paired lift, tested exactly on the pairs that differ.

    For 0/1 scores this is McNemar's exact test with Newcombe's interval (valid at small n, where a bootstrap of
    a few discordant pairs collapses to a point: 1 win of 1 gives [+1, +1]). Scores that are not 0/1 (recall of
    several facts, a graded match) keep the percentile bootstrap for the interval and the exact sign test."""
    pairs = list(zip(treated, baseline, strict=True))
    n = len(pairs)
    wins = sum(1 for t, b in pairs if t > b)
    losses = sum(1 for t, b in pairs if t < b)
    p = sign_test(wins, losses)
    if n and all(t in (0.0, 1.0) and b in (0.0, 1.0) for t, b in pairs):
        both = sum(1 for t, b in pairs if t == b == 1.0)
        low, high = newcombe_paired(both, wins, losses, n - both - wins - losses)
        diffs = np.asarray([t - b for t, b in pairs], dtype=float)
        stderr = float(np.std(diffs, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        return PairedLift((wins - losses) / n, n, stderr, low, high, wins, losses, p, "mcnemar-exact", "newcombe")
    boot = paired_bootstrap(treated, baseline)
    return PairedLift(boot.value, n, boot.stderr, boot.low, boot.high, wins, losses, p, "sign-exact", "bootstrap")


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided binomial p-value of `wins` against `losses` at one half (1.0 when no pair differs)."""
    m = wins + losses
    if m == 0:
        return 1.0
    tail: int = sum(math.comb(m, i) for i in range(min(wins, losses) + 1))
    # Integer division of Python's big integers rounds correctly where 2.0**m would overflow.
    share: float = 2 * tail / (1 << m)
    return min(1.0, share)


def newcombe_paired(both: int, wins: int, losses: int, neither: int) -> tuple[float, float]:
    """Newcombe's (1998) hybrid score interval, method 10, for the paired difference of two proportions.

    `both`: pairs right in both arms; `wins`: right only when treated; `losses`: right only in the baseline;
    `neither`. Square-and-add of the two marginal Wilson intervals with the correlation term phi, whose
    numerator carries Newcombe's continuity adjustment (as biostatUZH's confIntPairedProportion computes it)."""
    n = both + wins + losses + neither
    if n == 0:
        return math.nan, math.nan
    p1, p2 = (both + wins) / n, (both + losses) / n
    l1, u1 = wilson(p1, n)
    l2, u2 = wilson(p2, n)
    phi = 0.0
    product = (both + wins) * (losses + neither) * (both + losses) * (wins + neither)
    if product > 0:
        b = both * neither - wins * losses
        c = b - n / 2 if b > n / 2 else (b if b < 0 else 0.0)
        phi = c / math.sqrt(product)
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, low), min(1.0, high)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the given order: each compared with ALPHA controls the chance
    that any of the family is falsely called significant, however the tests depend on one another."""
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def detectable_lift(n: int, baseline: float, family: int = 1, discordant: float | None = None) -> float | None:
    """The smallest lift over a baseline accuracy that `n` pairs detect with POWER at ALPHA / `family` (the
    first step of Holm's correction, the strictest), by Connor's (1987) normal approximation to McNemar's test.

    `discordant` is the share of pairs that differ, as the run observed it (averaged over the regime's
    pipelines); McNemar's power rests on it. Without it the two arms' answers are taken as independent given
    the case, which gives the most pairs that differ for a lift and so the largest (most cautious) figure. None
    when no lift up to 1 - baseline is detectable."""
    if n < 1 or not 0.0 <= baseline < 1.0:
        return None
    z_alpha = NormalDist().inv_cdf(1 - ALPHA / (2 * max(1, family)))
    z_beta = NormalDist().inv_cdf(POWER)

    def pairs_needed(lift: float) -> float:
        if discordant:
            differ = max(discordant, lift)
        else:
            differ = (baseline + lift) * (1 - baseline) + baseline * (1 - baseline - lift)
        return (z_alpha * math.sqrt(differ) + z_beta * math.sqrt(max(0.0, differ - lift**2))) ** 2 / lift**2

    def detects(lift: float) -> bool:
        return pairs_needed(lift) <= n and lift * n >= MIN_DISCORDANT

    top = 1.0 - baseline
    if not detects(top):
        return None
    low, high = 0.0, top
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if detects(mid) else (mid, high)
    return high


def pairs_to_decide(lift: float, discordant: float, family: int = 1) -> int | None:
    """The pairs a run needs for a lift (or loss) of this size, with this share of pairs differing, to hold with
    POWER at ALPHA / `family`: Connor's approximation as `detectable_lift` reads it, and at least MIN_DISCORDANT
    pairs that differ. None for a lift of 0 or no pair differing."""
    size = abs(lift)
    if size == 0 or discordant <= 0:
        return None
    z_alpha = NormalDist().inv_cdf(1 - ALPHA / (2 * max(1, family)))
    z_beta = NormalDist().inv_cdf(POWER)
    differ = max(discordant, size)
    connor = (z_alpha * math.sqrt(differ) + z_beta * math.sqrt(max(0.0, differ - size**2))) ** 2 / size**2
    return math.ceil(max(connor, MIN_DISCORDANT / differ))


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
