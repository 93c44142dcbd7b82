"""How long a run will take, said before it sends: the upstream's speed fitted on answers it gave (the response
cache keeps each answer's latency, usage and calls), and each pipeline's cost measured as a multiple of `none`'s
on the same cases, applied to what the run still has to send (a cached answer costs no time).

The answers come from the cache (an earlier run's, or `--cache`), or from the run's own first requests: before the
bulk, a run whose cache does not measure every pipeline sends `none` at three sizes, then each pipeline on the
smallest case it shares with `none` (`calibration_jobs`), for about a minute (`TIMING_BOUND_S`): requests it would
send anyway, cached, so the run reuses them. A pipeline's multiple of `none` is read on the cases where the cache
holds both (the sum of its seconds over the sum of `none`'s there). Where a pipeline has no such case, its requests
are priced from the cost estimate's calls and tokens, which are high (every call with the whole prompt), and the
line says so. The embedded models' speeds are known (`proxy.embedded_models`, measured in docs/performance.md): a run
on one is priced from them before its first request, and sends nothing to time it.

The speed is one line: seconds = a x calls + b x prompt tokens + c x completion tokens, least squares with every
coefficient at least zero (an upstream's prompt evaluation, its generation, and what each call costs besides)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contextlift.eval.cache import Answer
from contextlift.eval.cases import Case
from contextlift.eval.cost import JobCost

MIN_ANSWERS = 3
"""Answers below which no speed is fitted: three coefficients need three points."""
MAX_CACHE_LINES = 200_000
"""Lines of a cache read for a dry run's estimate: the speed is the same on the last 200,000 as on all."""
TIMING_BOUND_S = 60.0
"""Seconds of timing requests after which the run stops timing and starts, once MIN_ANSWERS are answered: on a
slow or busy upstream a pipeline left unmeasured is priced from its tokens rather than the run held back."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One answered request: what it cost the upstream and how long it took, through the proxy."""

    strategy: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    @classmethod
    def of(cls, answer: Answer) -> Observation | None:
        """The answer as an observation; None where it failed or lacks a figure the fit needs."""
        usage = answer.usage
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if answer.error is not None or answer.latency_s is None or not answer.upstream_calls:
            return None
        if not isinstance(prompt, int) or not isinstance(completion, int) or answer.latency_s <= 0:
            return None
        return cls(answer.strategy, answer.upstream_calls, prompt, completion, answer.latency_s)


@dataclass(frozen=True, slots=True)
class Speed:
    per_call_s: float
    per_prompt_token_s: float
    per_completion_token_s: float
    answers: int
    """The answers it was fitted on; 0 for a speed known beforehand (`known`)."""
    source: str
    """Where the answers came from, or where the speed was measured, as the estimate's line says it."""

    @classmethod
    def known(cls, prompt_tokens_per_s: float, completion_tokens_per_s: float, source: str) -> Speed:
        """A speed measured beforehand (an embedded model's), with nothing a call besides."""
        return cls(0.0, 1 / prompt_tokens_per_s, 1 / completion_tokens_per_s, 0, source)

    def seconds(self, calls: float, prompt_tokens: float, completion_tokens: float) -> float:
        return (
            calls * self.per_call_s
            + prompt_tokens * self.per_prompt_token_s
            + completion_tokens * self.per_completion_token_s
        )

    def describe(self) -> str:
        def rate(per_token: float) -> str:
            return f"{1 / per_token:,.0f}/s" if per_token > 0 else "no measurable cost"

        rates = f"prompt tokens {rate(self.per_prompt_token_s)}, completion tokens {rate(self.per_completion_token_s)}"
        if not self.answers:
            return f"{rates}, {self.source}"
        return f"{rates}, {self.per_call_s:.2f} s a call besides; fitted on {self.answers} answers {self.source}"


def fit(observations: Sequence[Observation], source: str) -> Speed | None:
    """The upstream's speed from `observations`; None for fewer than MIN_ANSWERS or where no fit explains them.
    Non-negative least squares by trying each subset of the three terms (seven small solves) and keeping the best
    fit whose coefficients are all at least zero: scipy's nnls would do it, and scipy is no dependency of the eval."""
    if len(observations) < MIN_ANSWERS:
        return None
    features = np.array([[o.calls, o.prompt_tokens, o.completion_tokens] for o in observations], dtype=float)
    seconds = np.array([o.seconds for o in observations], dtype=float)
    best: tuple[float, np.ndarray] | None = None
    for size in (3, 2, 1):
        for columns in itertools.combinations(range(3), size):
            solution, *_ = np.linalg.lstsq(features[:, columns], seconds, rcond=None)
            if (solution < 0).any():
                continue
            coefficients = np.zeros(3)
            coefficients[list(columns)] = solution
            residual = float(np.sum((features @ coefficients - seconds) ** 2))
            if best is None or residual < best[0] - 1e-12:
                best = (residual, coefficients)
    if best is None or not best[1].any():
        return None
    a, b, c = (float(x) for x in best[1])
    return Speed(a, b, c, len(observations), source)


def read_observations(path: Path) -> list[Observation]:
    """The observations in a response cache file, any upstream's (a dry run does not know which will answer); a
    missing file or torn line gives none."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-MAX_CACHE_LINES:]
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            record = json.loads(line)
            observation = Observation.of(Answer.of(record))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if observation is not None:
            found.append(observation)
    return found


@dataclass(frozen=True, slots=True)
class PipelineTime:
    strategy: str
    seconds: float
    measured: bool
    """Whether the pipeline's cost relative to `none` was measured (else priced from the estimate's tokens)."""


@dataclass(frozen=True, slots=True)
class TimeEstimate:
    speed: Speed
    pipelines: tuple[PipelineTime, ...]
    cached: int
    jobs: tuple[float, ...] = ()
    """Each job's seconds, in the order given (0 for a cached one): what the progress line weighs the work by."""

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.pipelines)

    def render(self) -> str:
        """The lines printed before a run: the total, how it was measured, and a row per pipeline."""
        rows = [p for p in self.pipelines if p.seconds > 0]
        width = max([len("pipeline"), *(len(p.strategy) for p in rows)])
        lines = [
            f"time: about {duration(self.seconds)} at the upstream's speed ({self.speed.describe()})"
            + (f"; {self.cached:,} requests answered from the cache take none" if self.cached else ""),
            f"  {'pipeline':<{width}}  {'time':>8}",
        ]
        # At a speed known beforehand no answer measures any pipeline: every row is priced alike, and one line says so.
        fitted = self.speed.answers > 0
        for p in rows:
            high = fitted and not p.measured
            lines.append(f"  {p.strategy:<{width}}  {duration(p.seconds):>8}" + ("  (high)" if high else ""))
        if not fitted:
            lines.append("  each pipeline priced from its estimated calls and tokens; the progress line corrects the "
                         "time left from the answers")  # fmt: skip
        elif not all(p.measured for p in rows):
            lines.append("  (high): no answer of the pipeline yet, so priced from its estimated calls and tokens")
        return "\n".join(lines)


def relative_cost(pairs: Iterable[tuple[str, float, float]]) -> dict[str, float]:
    """Per pipeline, what a request of it takes as a multiple of a `none` request: over the cases where both were
    answered (`pairs`: the pipeline, its seconds and `none`'s on one case), the sum of its seconds over `none`'s."""
    sums: dict[str, list[float]] = {}
    for strategy, seconds, none_seconds in pairs:
        row = sums.setdefault(strategy, [0.0, 0.0])
        row[0] += seconds
        row[1] += none_seconds
    return {"none": 1.0} | {s: own / none for s, (own, none) in sums.items() if none > 0}


def latency_pairs(
    work: Iterable[tuple[Case, str]], answer_of: Callable[[Case, str], Answer | None]
) -> list[tuple[str, float, float]]:
    """`relative_cost`'s input: each job's latency beside `none`'s on the same case, where both were answered."""
    pairs = []
    for case, strategy in work:
        own, none = answer_of(case, strategy), answer_of(case, "none")
        if own is not None and none is not None and own.latency_s and none.latency_s:
            pairs.append((strategy, own.latency_s, none.latency_s))
    return pairs


def relative_cost_unpaired(observations: Iterable[Observation]) -> dict[str, float]:
    """`relative_cost` where the answers cannot be matched to their cases (a dry run that does not know the model
    the requests name): the mean of each pipeline's seconds over the mean of `none`'s, which holds where the cache
    asked every pipeline on the same cases (an earlier run of the same plan)."""
    by_strategy: dict[str, list[float]] = {}
    for o in observations:
        by_strategy.setdefault(o.strategy, []).append(o.seconds)
    baseline = by_strategy.get("none")
    if not baseline:
        return {}
    none_mean = sum(baseline) / len(baseline)
    return {s: (sum(v) / len(v)) / none_mean for s, v in by_strategy.items() if none_mean > 0}


def estimate_time(jobs: Sequence[tuple[JobCost, bool]], speed: Speed, relative: Mapping[str, float]) -> TimeEstimate:
    """Seconds per pipeline for the jobs (each with whether it is cached) not cached: `none`'s time for the case
    times the pipeline's measured multiple where it has one, else the speed applied to the estimate's tokens and
    calls (high)."""
    totals: dict[str, list[float]] = {}
    each: list[float] = []
    cached = 0
    for job, in_cache in jobs:
        row = totals.setdefault(job.strategy, [0.0, 1.0])
        if in_cache:
            cached += 1
            each.append(0.0)
            continue
        if job.strategy in relative:
            seconds = speed.seconds(1, job.case_prompt_tokens, job.case_completion_tokens) * relative[job.strategy]
        else:
            seconds = speed.seconds(job.calls, job.prompt_tokens, job.completion_tokens)
            row[1] = 0.0
        row[0] += seconds
        each.append(seconds)
    pipelines = tuple(PipelineTime(s, seconds, bool(measured)) for s, (seconds, measured) in totals.items())
    return TimeEstimate(speed, pipelines, cached, tuple(each))


def calibration_jobs(
    work: Sequence[tuple[Case, str]], size_of: Mapping[str, int], exclude: Set[str] = frozenset()
) -> list[tuple[Case, str]]:
    """The few requests that measure the upstream before the bulk: each pipeline of the run (but `exclude`) with
    `none` on the smallest case they share, and `none` on the median and the largest of `none`'s cases besides
    (three sizes for the fit). Each is a request of the run itself (`size_of`: a case's key to its estimated prompt
    tokens). The `none` requests come first: a timing phase cut short (TIMING_BOUND_S) still fits a speed."""
    runs: dict[str, set[str]] = {}
    cases: dict[str, Case] = {}
    for case, strategy in work:
        if strategy not in exclude:
            runs.setdefault(strategy, set()).add(case.key)
            cases[case.key] = case
    with_none = runs.get("none", set())
    if not with_none:
        return []

    def smallest(keys: Iterable[str]) -> str:
        return min(keys, key=lambda k: (size_of[k], k))

    chosen: dict[tuple[str, str], None] = {}
    for strategy, keys in runs.items():
        shared = keys & with_none
        if strategy != "none" and shared:
            first = smallest(shared)
            chosen |= {(first, "none"): None, (first, strategy): None}
    ordered = sorted(with_none, key=lambda k: (size_of[k], k))
    for key in (ordered[len(ordered) // 2], ordered[-1]):
        chosen[(key, "none")] = None
    ordered_jobs = sorted(chosen, key=lambda job: job[1] != "none")  # stable: each group keeps its order
    return [(cases[key], strategy) for key, strategy in ordered_jobs]


def duration(seconds: float) -> str:
    """Seconds as a person reads a wait: `45 s`, `12 min`, `1.7 h`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
