"""`contextlift eval` and `contextlift eval-merge`: the command line of the evaluation module. The proxy is
reached over HTTP only; `contextlift.eval.local_proxy` starts one in-process when no `--proxy` is given."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from contextlift.eval.cache import Answer, ResponseCache, request_key
from contextlift.eval.case_rankings import attach_rankings
from contextlift.eval.cases import REASKED, Case
from contextlift.eval.cost import JobCost, confirmed, estimate, job_costs, render
from contextlift.eval.identity import first_listed_model, identify, new_run_id
from contextlift.eval.plan import PROFILES, TASKS, build_cases, in_shard, make_plan, parse_shard, task_record
from contextlift.eval.progress import Progress
from contextlift.eval.report.publish import read_info, write_report, write_samples
from contextlift.eval.runner import Runner, Target, jobs, request_body
from contextlift.eval.sources import find_sources
from contextlift.eval.tasks import replay
from contextlift.eval.timing import (
    MIN_ANSWERS,
    TIMING_BOUND_S,
    Observation,
    Speed,
    TimeEstimate,
    calibration_jobs,
    duration,
    estimate_time,
    fit,
    latency_pairs,
    read_observations,
    relative_cost,
    relative_cost_unpaired,
)
from contextlift.eval.verdicts.results import RunInfo, load_samples


class EvalError(Exception):
    """A run that cannot start: bad arguments, missing data, an unreachable proxy."""


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--proxy", help="base URL of a running proxy (e.g. http://127.0.0.1:8080/v1); default: start one here")
    add("--upstream", help="for the proxy started here: OpenAI-compatible base URL (default: the embedded model)")
    add("--port", type=int, default=0, help="for the proxy started here: its loopback port (default: a free one)")
    add("--config", type=Path, help="for the proxy started here: TOML file of settings")
    add(
        "--local-model",
        metavar="NAME",
        help="for the proxy started here without an upstream: the embedded model to answer (default smollm2-135m; "
        "`contextlift serve --help` lists them)",
    )
    add("--model", help="model name sent in each request (default: the first one the proxy lists)")
    add("--api-key", help="bearer token sent with each request (forwarded upstream); never written to output")
    add("--profile", choices=list(PROFILES), default="quick", help="quick: minutes on 2 CPU cores; full: paper sizes")
    add("--tasks", help=f"comma-separated, from {', '.join(TASKS)} (default: all)")
    add(
        "--strategies",
        action="append",
        metavar="HEADER",
        help="one X-Context-Strategy value per flag, e.g. --strategies none --strategies 'reorder, medoid; k=5'",
    )
    add("--sizes", action="append", default=[], metavar="[TASK=]N,...", help="context sizes, in the task's unit")
    add(
        "--positions",
        action="append",
        default=[],
        metavar="[TASK=]P,...",
        help="gold positions: indices (4) or shares of the way through (50%%)",
    )
    add("--samples", action="append", default=[], metavar="[TASK=]N", help="samples per size x position")
    add(
        "--option",
        action="append",
        default=[],
        metavar="TASK.KEY=VALUE",
        help="task options: litm-qa.prompt, swim.prompt (paper, langchain-stuff, langchain-retrievalqa, llamaindex, "
        "dspy), litm-qa.distractors (easy, hard, squad), swim.budget, length.distraction, length.problems, "
        "multifact.needles, ...",
    )
    add("--seed", type=int, default=0, help="seed of every generated case (default 0)")
    add(
        "--reasked",
        type=int,
        default=30,
        metavar="N",
        help="ask `none` again on up to N cases per task and variant, after the rest: how often the answers differ is "
        "the upstream's own noise, the floor a lift must clear (default 30; 0: not measured)",
    )
    add(
        "--replay",
        type=Path,
        metavar="CAPTURED.jsonl",
        help="run the strategies on requests captured by shadow evaluation (CONTEXTLIFT_SHADOW_CAPTURE=true) "
        "instead of the benchmarks: agreement with the served answer, stability under a permutation of the "
        "documents, and SWiM's positional test built from each request's own documents",
    )
    add("--data", type=Path, help="folder holding the papers' files (nq-open-*, kv-retrieval-*, gsm8k, squad)")
    add("--documents", type=Path, help="folder of your own .txt/.md documents for the swim task")
    add("--concurrency", type=int, default=1, help="requests in flight (default 1)")
    add("--timeout", type=float, default=600.0, help="seconds per request (default 600)")
    add("--retries", type=int, default=3, help="retries of a timed-out, 429 or 5xx request (default 3)")
    add("--shard", help="INDEX/COUNT: run only this shard of the cases (an Indexed Job's completion index)")
    add("--out", type=Path, default=Path("contextlift-eval"), help="report folder (default ./contextlift-eval)")
    add("--cache", type=Path, help="response cache, JSON lines (default OUT/responses.jsonl)")
    add(
        "--dry-run",
        action="store_true",
        help="print the cases, requests and estimated tokens per pipeline; send nothing",
    )
    add("--yes", action="store_true", help="start a large run against a remote upstream without asking")


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("parts", nargs="+", type=Path, help="report folders of the shards (each with samples.jsonl)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the merged report")


def run_eval(
    args: argparse.Namespace,
    proxy_url: str | None,
    *,
    local: bool = True,
    upstream_identity: dict[str, Any] | None = None,
    known_speed: Speed | None = None,
) -> int:
    """Builds the cases, says what sending them costs and how long it will take, sends them through the proxy at
    `proxy_url` with a progress line, writes the report. `proxy_url` None: a dry run (nothing is sent, SWiM's
    questions from `--documents` not generated); `local`: the upstream is on this machine, so a large run starts
    without asking; `upstream_identity`: the embedded model's, where it is the upstream (else the proxy's model
    listing names it); `known_speed`: the upstream's speed measured beforehand (an embedded model's), which prices
    the run before its first request."""
    try:
        plan = make_plan(
            args.profile,
            _split(args.tasks),
            args.strategies,
            args.sizes,
            args.positions,
            args.samples,
            args.option,
            args.seed,
        )
        shard = parse_shard(args.shard) if args.shard else None
    except ValueError as error:
        raise EvalError(str(error)) from None
    if args.concurrency < 1:
        raise EvalError("--concurrency must be at least 1")
    if args.reasked < 0:
        raise EvalError("--reasked must be 0 or more")
    if proxy_url is None:
        return _dry_run(args, plan, shard, known_speed)
    base_url = proxy_url.rstrip("/") if proxy_url.rstrip("/").endswith("/v1") else proxy_url.rstrip("/") + "/v1"
    model = args.model or _first_model(base_url, args.api_key)
    upstream = identify(base_url, model, args.api_key, upstream_identity, None if args.proxy else args.upstream)
    run = new_run_id()
    cache = ResponseCache(args.cache or args.out / "responses.jsonl", upstream.fingerprint)
    target = Target(base_url, model, args.api_key, args.timeout, args.retries, upstream=upstream.fingerprint, run=run)
    runner = Runner(target, cache, args.concurrency)
    try:
        if args.replay is not None:
            cases, notes = replay.build(args.replay, runner.ask, args.seed)
        else:
            sources = find_sources(args.data, args.documents)
            cases, notes = build_cases(plan, sources, runner.ask)
        # The A/A arm drawn from every case, then cut to the shard: shards together re-ask what one run would.
        work = [(c, s) for c, s in jobs(cases, plan.strategies, args.reasked, args.seed) if in_shard(c, shard)]
        cases = [c for c in cases if in_shard(c, shard)]
        cost = estimate(cases, work)
        others = len(cache) - cache.reusable()
        print(f"contextlift eval: {render(cost, base_url)}\n({cache.reusable()} answers cached in {cache.path}: not "
              f"sent" + (f"; {others} from other upstreams not reused" if others else "") + ")\n"
              f"upstream {upstream.fingerprint}: {upstream.describe()}", file=sys.stderr)  # fmt: skip
        for reason in upstream.unread:
            print(f"contextlift eval: not read, the upstream known without it: {reason}", file=sys.stderr)
        allowed = confirmed(cost, local=local, yes=args.yes)
        if allowed is None:
            raise EvalError(f"{cost.requests:,} requests to a remote upstream: pass --yes to send them, or narrow the "
                            "run (--tasks, --samples, --strategies; --dry-run prices it)")  # fmt: skip
        if not allowed:
            print("contextlift eval: not started", file=sys.stderr)
            return 1
        timed = _say_time(runner, work, known_speed)
        samples = asyncio.run(runner.run(work, Progress(len(work), estimates=timed.jobs if timed else None)))
        if args.replay is None:
            samples = attach_rankings(cases, samples, plan.strategies)
    except (ValueError, OSError) as error:
        raise EvalError(str(error)) from None
    finally:
        cache.close()
    if cache.reasked:
        print(f"contextlift eval: asked {cache.reasked} requests again: their cached answers came from another "
              "upstream (or from before upstreams were recorded)", file=sys.stderr)  # fmt: skip
    info = RunInfo(
        model=model,
        proxy=_public(base_url),
        strategies=plan.strategies,
        seed=args.seed,
        profile=args.profile,
        notes=tuple(notes),
        tasks={replay.INFO.name: asdict(replay.INFO)}
        if args.replay is not None
        else {task: task_record(task, grid) for task, grid in plan.tasks.items()},
        upstreams={upstream.fingerprint: upstream.to_json()},
        run=run,
    )
    if shard is not None:
        write_samples(args.out, samples, info)
        print(f"shard {shard[0]}/{shard[1]}: {len(samples)} samples in {args.out}", file=sys.stderr)
        return 0
    data = write_report(args.out, samples, info)
    _print_headline(data, args.out)
    return 0


def _dry_run(args: argparse.Namespace, plan: Any, shard: tuple[int, int] | None, known: Speed | None) -> int:
    """Print what the run would send, building its cases without a proxy: nothing is sent."""
    generated: list[str] = []

    def ask(prompt: str) -> str:  # SWiM's question generation, counted instead of asked
        generated.append(prompt)
        return ""

    try:
        if args.replay is not None:
            cases, _ = replay.build(args.replay, ask, args.seed)
        else:
            cases, _ = build_cases(plan, find_sources(args.data, args.documents), ask)
    except (ValueError, OSError) as error:
        raise EvalError(str(error)) from None
    work = [(c, s) for c, s in jobs(cases, plan.strategies, args.reasked, args.seed) if in_shard(c, shard)]
    cases = [c for c in cases if in_shard(c, shard)]
    target = args.proxy or args.upstream or "the proxy started here"
    print(render(estimate(cases, work), target))
    print(_dry_run_time(args, work, known))
    if generated:
        print(f"plus {len(generated):,} question-generation requests while the cases are built; the cases from "
              "them are not counted above (a dry run generates none)")  # fmt: skip
    return 0


def _say_time(runner: Runner, work: list[tuple[Case, str]], known: Speed | None) -> TimeEstimate | None:
    """Prints how long the run will take, before the bulk of it, and returns the estimate the progress line weighs
    the work by (None where the cache answers it all, or nothing measures the upstream). The speed is fitted on this
    upstream's cached answers; else it is `known` (an embedded model's, measured beforehand), and nothing is sent
    to measure it; else a few of the run's own requests are sent first, for about a minute (eval.timing)."""
    cache = runner.cache
    priced = job_costs(work)
    # Each request's key hashed once: the answers are looked up again after the timing requests.
    keys = {(case.key, s): runner.key(case, s) for case, strategy in work for s in (strategy, "none")}

    def answer_of(case: Case, strategy: str) -> Answer | None:
        return cache.answer_for(keys[(case.key, strategy)])

    def measured() -> tuple[list[tuple[JobCost, bool]], list[Observation], dict[str, float]]:
        marked = [(job, answer_of(c, s) is not None) for job, (c, s) in zip(priced, work, strict=True)]
        observations = [o for a in cache.answers() if (o := Observation.of(a))]
        return marked, observations, {**relative_cost(latency_pairs(work, answer_of)), REASKED: 1.0}

    marked, observations, relative = measured()
    if all(cached for _, cached in marked):
        return None
    unmeasured = {job.strategy for job, cached in marked if not cached} - relative.keys()
    if known is None and (fit(observations, "") is None or unmeasured):
        sizes = {case.key: job.case_prompt_tokens for job, (case, _) in zip(priced, work, strict=True)}
        calibration = [(c, s) for c, s in calibration_jobs(work, sizes, {REASKED}) if not cache.holds(runner.key(c, s))]
        if calibration:
            _time_the_upstream(runner, calibration)
            marked, observations, relative = measured()
    speed = fit(observations, f"of this upstream in {cache.path}") or known
    if speed is None:
        print("contextlift eval: time: unknown (too few answers to fit the upstream's speed on); the progress line "
              "gives the time left from the answers' pace", file=sys.stderr)  # fmt: skip
        return None
    estimate = estimate_time(marked, speed, relative)
    print(f"contextlift eval: {estimate.render()}", file=sys.stderr)
    return estimate


def _time_the_upstream(runner: Runner, calibration: list[tuple[Case, str]]) -> None:
    """Sends the timing requests, as many at a time as the run sends, until all are answered or, once MIN_ANSWERS
    are, TIMING_BOUND_S have passed; each answer on the progress line."""
    print(f"contextlift eval: timing the upstream on up to {len(calibration)} of the run's own requests, for about "
          f"{duration(TIMING_BOUND_S)} once {MIN_ANSWERS} have answered (answered once: the run reuses them)",
          file=sys.stderr)  # fmt: skip
    progress = Progress(len(calibration), label="timing the upstream", left=False)
    started = time.monotonic()
    for first in range(0, len(calibration), runner.concurrency):
        spent = time.monotonic() - started
        if progress.done - progress.errors >= MIN_ANSWERS and spent >= TIMING_BOUND_S:
            progress.end(f"stopped at its bound: {progress.done} of {len(calibration)} requests in {duration(spent)}")
            return
        asyncio.run(runner.run(calibration[first : first + runner.concurrency], progress))


def _dry_run_time(args: argparse.Namespace, work: list[tuple[Case, str]], known: Speed | None) -> str:
    """The dry run's time line: from the answers recorded in the cache the run would use, whichever upstream gave
    them, else at the `known` speed of the embedded model the run would start; nothing is sent to measure (a dry
    run sends nothing)."""
    path = args.cache or args.out / "responses.jsonl"
    observations = read_observations(path)
    speed = fit(observations, f"recorded in {path}") or known
    if speed is None:
        return (f"time: unknown, no answers recorded in {path} to measure the upstream's speed on; a run measures it "
                "on a few of its own requests first and says it before the rest (or pass --cache of an earlier "
                "run against the same upstream)")  # fmt: skip
    priced: list[JobCost] = job_costs(work)
    if args.model:
        cache = ResponseCache(path)

        def answer(case: Case, strategy: str) -> Answer | None:
            return cache.answer_for(request_key(args.model, strategy, request_body(case, args.model)))

        priced_jobs = [(job, answer(c, s) is not None) for job, (c, s) in zip(priced, work, strict=True)]
        relative = relative_cost(latency_pairs(work, answer))
        line = ""
    else:
        priced_jobs = [(job, False) for job in priced]
        relative = relative_cost_unpaired(observations)
        line = (
            "\n  cached answers not subtracted, and each pipeline's multiple of none read over the whole cache: which "
            "requests the answers belong to depends on the model (--model)"
            if observations
            else ""
        )
    return estimate_time(priced_jobs, speed, {**relative, REASKED: 1.0}).render() + line


def run_merge(args: argparse.Namespace) -> int:
    """One report from the shards' parts."""
    try:
        samples = load_samples(part / "samples.jsonl" for part in args.parts)
        infos = [read_info(part) for part in args.parts]
    except (OSError, ValueError, KeyError) as error:
        raise EvalError(f"cannot read the parts: {error}") from None
    notes = tuple(dict.fromkeys(n for info in infos for n in info.notes))
    upstreams = {k: v for info in infos for k, v in info.upstreams.items()}
    runs = {info.run for info in infos}
    info = infos[0].__class__(
        **{**asdict(infos[0]), "notes": notes, "upstreams": upstreams, "run": runs.pop() if len(runs) == 1 else None}
    )
    data = write_report(args.out, samples, info)
    _print_headline(data, args.out)
    return 0


def _print_headline(data: dict[str, Any], out: Path) -> None:
    lifts = [r for r in data["lift"] if r["size"] is None]
    for row in lifts:
        low, high = row["ci95"]
        print(
            f"{row['task']:<10} {row['variant']:<20} {row['strategy']:<24} lift {row['value']:+.3f} "
            f"[{low:+.3f}, {high:+.3f}] n={row['n']}"
        )
    print(f"report: {out / 'report.md'}")


def _first_model(base_url: str, api_key: str | None) -> str:
    try:
        return first_listed_model(base_url, api_key)
    except ValueError as error:
        raise EvalError(f"cannot list models at {base_url}/models ({error}); pass --model") from None


def _public(url: str) -> str:
    """The URL without credentials, for the report."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


__all__ = ["EvalError", "add_eval_arguments", "add_merge_arguments", "run_eval", "run_merge"]
