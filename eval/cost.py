"""What a run will cost, said before it starts: cases, requests, and per pipeline its upstream calls and an
estimate of prompt and completion tokens. `contextlift eval --dry-run` prints only this; above
`CONFIRM_ABOVE` requests against an upstream that is not on this machine the run asks first (on a terminal) or
needs `--yes`, since a paid API bills every one of them.

The estimate is deliberately on the high side: each call of a pipeline is counted with the case's whole prompt and
its `max_tokens` of completion (a chain's chunk calls see less, a filter drops documents), a pipeline's calls as
many as the case's prompt needs (`Pipeline.upstream_calls`: a chain's, a call per chunk), prompts at
CHARS_PER_TOKEN, as tokenizing tens of millions of characters to price a run would take longer than the run's
first minute."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from contextlift.eval.cases import Case
from contextlift.strategies import Pipeline, build_registry, parse_selection

CONFIRM_ABOVE = 1_000
"""Requests past which a run against a remote upstream asks first: the quick profile (177 requests) and a narrowed
run pass; the full profile (57,150) does not."""
CHARS_PER_TOKEN = 4.0
"""English text in the OpenAI tokenizers averages about four characters a token."""


@dataclass(frozen=True, slots=True)
class PipelineCost:
    strategy: str
    requests: int
    calls: int
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class RunCost:
    cases: int
    requests: int
    pipelines: tuple[PipelineCost, ...]

    @property
    def calls(self) -> int:
        return sum(p.calls for p in self.pipelines)

    @property
    def prompt_tokens(self) -> int:
        return sum(p.prompt_tokens for p in self.pipelines)

    @property
    def completion_tokens(self) -> int:
        return sum(p.completion_tokens for p in self.pipelines)


@dataclass(frozen=True, slots=True)
class JobCost:
    """One request of the run, priced: its pipeline's calls and tokens, and its case's prompt and completion once
    (what `none` sends for it; eval.timing prices a request against that)."""

    strategy: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    case_prompt_tokens: int
    case_completion_tokens: int


def job_costs(work: Sequence[tuple[Case, str]]) -> list[JobCost]:
    """Each of `work`'s requests priced, in its order."""
    registry = build_registry()
    pipelines: dict[str, Pipeline | None] = {}
    priced = []
    for case, strategy in work:
        if strategy not in pipelines:
            try:
                pipelines[strategy] = registry.resolve(parse_selection(strategy), {})
            except ValueError:  # a plugin's strategy this process does not have: the proxy will say
                pipelines[strategy] = None
        pipeline = pipelines[strategy]
        prompt = _prompt_tokens(case)
        calls, copies = (pipeline.upstream_calls(prompt), pipeline.prompt_copies) if pipeline else (1, 1)
        completion = case.max_tokens
        priced.append(JobCost(strategy, calls, calls * copies * prompt, calls * completion, prompt, completion))
    return priced


def estimate(cases: Sequence[Case], work: Sequence[tuple[Case, str]]) -> RunCost:
    """The cost of sending `work` (each case with a strategy), per strategy in the order first met."""
    totals: dict[str, list[int]] = {}
    for job in job_costs(work):
        row = totals.setdefault(job.strategy, [0, 0, 0, 0])
        row[0] += 1
        row[1] += job.calls
        row[2] += job.prompt_tokens
        row[3] += job.completion_tokens
    pipelines = tuple(PipelineCost(s, *row) for s, row in totals.items())
    return RunCost(len(cases), len(work), pipelines)


def render(cost: RunCost, target: str) -> str:
    """The table printed before a run."""
    width = max([len("pipeline"), *(len(p.strategy) for p in cost.pipelines)])
    lines = [
        f"{cost.cases:,} cases, {cost.requests:,} requests through {target}; upstream calls and tokens estimated "
        "high (every call with the whole prompt, completions at max_tokens):",
        f"  {'pipeline':<{width}}  {'requests':>9}  {'calls':>9}  {'prompt tokens':>13}  {'completion tokens':>17}",
    ]
    rows = [*cost.pipelines, PipelineCost("total", cost.requests, cost.calls, cost.prompt_tokens,
                                           cost.completion_tokens)]  # fmt: skip
    for p in rows:
        lines.append(
            f"  {p.strategy:<{width}}  {p.requests:>9,}  {p.calls:>9,}  {_tokens(p.prompt_tokens):>13}  "
            f"{_tokens(p.completion_tokens):>17}"
        )
    return "\n".join(lines)


def confirmed(
    cost: RunCost, *, local: bool, yes: bool, stdin: TextIO = sys.stdin, ask: Callable[[str], str] = input
) -> bool | None:
    """Whether the run may start: True when it may, False when the user said no, None when it must not start
    unasked (a large run against a remote upstream, no terminal to ask on, no `--yes`)."""
    if yes or local or cost.requests <= CONFIRM_ABOVE:
        return True
    if not stdin.isatty():
        return None
    answer = ask(f"Send {cost.requests:,} requests ({_tokens(cost.prompt_tokens)} prompt tokens) upstream? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _prompt_tokens(case: Case) -> int:
    if case.body is not None:
        text = json.dumps(case.body.get("messages", []), ensure_ascii=False)
    else:
        text = (case.system or "") + case.prompt
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _tokens(count: int) -> str:
    if count >= 1_000_000:
        return f"~{count / 1_000_000:.1f}M"
    if count >= 10_000:
        return f"~{count / 1_000:.0f}k"
    return f"~{count:,}"
