"""The embedded model's speed on this machine, and which server settings keep its answers identical: prompt
tokens per second (a one-token answer to each prompt) and generated tokens per second (the same prompt answered
at the eval's max_tokens, less the one-token time), for each variant of llama.cpp's server in turn:

- `default`: what `contextlift eval` and `scripts/serve` start (every core for prompt and generation, llama-cpp-
  python's batch of 512 prompt tokens per step, the prompt evaluated from its first token);
- `batch-N`: N prompt tokens per step (`--n_batch` and `--n_ubatch`);
- `two-processes`: one server per core, one thread each, the prompts sent to both at once (throughput, not
  latency: the wall time of the whole set);
- `reuse-prompt`: the previous prompt's cache kept (`local_model_reuse_prompt`), each case asked as `none` and then
  with a block added after its context (as `excerpt` does), so the second shares the first's prefix.

Each variant's answers are compared with `default`'s, prompt by prompt: a variant that changes one answer cannot
serve the eval, whose cached answers and reference runs assume `default`'s.

    .venv/bin/python scripts/bench_model.py              # about 8 minutes on 2 cores
    .venv/bin/python scripts/bench_model.py --cases 2    # a shorter run
    .venv/bin/python scripts/bench_model.py --model qwen2.5-coder-0.5b --batches "" --variants default,reuse-prompt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.sources import find_sources
from contextlift.proxy.embedded_models import DEFAULT, MODELS, embedded_model
from contextlift.proxy.local_model import LocalModel, bundled_model_path

VARIANTS = ("default", "batch", "two-processes", "reuse-prompt")
ADDED = "\n\nThe passage that answers it, quoted from the documents above: "


@dataclass
class Asked:
    prompt_tokens: int
    first_s: float
    """Seconds to a one-token answer: the prompt's evaluation."""
    whole_s: float
    completion_tokens: int
    answer: str


def prompts(cases: int) -> list[list[dict[str, str]]]:
    """Lost in the Middle's QA prompts (10 documents, easy distractors, the gold first/middle/last): the eval's own."""
    plan = make_plan("full", ["litm-qa"], ["none"], ["10"], ["0%,50%,100%"], [str(cases)], [], 0)
    built, _ = build_cases(plan, find_sources(None))
    return [list(c.messages) for c in built if c.position is not None][: cases * 3]


def with_block(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The prompt with text added after it, as `excerpt` adds its block: the first prompt is the second's prefix."""
    last = messages[-1]
    return [*messages[:-1], {**last, "content": last["content"] + ADDED}]


def ask(
    client: httpx.Client, model: LocalModel, messages: list[dict[str, str]], max_tokens: int
) -> tuple[float, dict[str, Any]]:
    body = {"model": model.alias, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
    started = time.perf_counter()
    response = client.post(f"{model.base_url}/chat/completions", json=body)
    response.raise_for_status()
    return time.perf_counter() - started, response.json()


def asked(client: httpx.Client, model: LocalModel, messages: list[dict[str, str]]) -> Asked:
    first_s, _ = ask(client, model, messages, 1)
    whole_s, answer = ask(client, model, messages, 64)
    usage = answer["usage"]
    return Asked(
        usage["prompt_tokens"], first_s, whole_s, usage["completion_tokens"], answer["choices"][0]["message"]["content"]
    )


def speeds(results: list[Asked]) -> dict[str, float]:
    prompt = sum(r.prompt_tokens for r in results) / sum(r.first_s for r in results)
    generated = sum(r.completion_tokens - 1 for r in results) / sum(max(r.whole_s - r.first_s, 1e-9) for r in results)
    return {"prompt_tokens_per_s": prompt, "generated_tokens_per_s": generated}


def one_server(cases: list[list[dict[str, str]]], **settings: Any) -> tuple[list[Asked], float]:
    with LocalModel(quiet=True, **settings) as model, httpx.Client(timeout=600) as client:
        started = time.perf_counter()
        results = [asked(client, model, messages) for messages in cases]
        return results, time.perf_counter() - started


def two_processes(cases: list[list[dict[str, str]]], **settings: Any) -> tuple[list[Asked], float]:
    cores = sorted(os.sched_getaffinity(0))
    models = [LocalModel(quiet=True, threads=1, **settings) for _ in cores[:2]]
    try:
        for model in models:
            model.start()
        with httpx.Client(timeout=600) as client, ThreadPoolExecutor(len(models)) as pool:
            started = time.perf_counter()
            servers = [models[i % len(models)] for i in range(len(cases))]
            results = list(pool.map(lambda pair: asked(client, *pair), zip(servers, cases, strict=True)))
            return results, time.perf_counter() - started
    finally:
        for model in models:
            model.stop()


def reuse(cases: list[list[dict[str, str]]], reuse_prompt: bool, **settings: Any) -> tuple[list[str], float]:
    """Each case as `none`, then with the block added: the seconds of the second requests, and every answer."""
    answers: list[str] = []
    seconds = 0.0
    with LocalModel(quiet=True, reuse_prompt=reuse_prompt, **settings) as model, httpx.Client(timeout=600) as client:
        for messages in cases:
            _, first = ask(client, model, messages, 64)
            took, second = ask(client, model, with_block(messages), 64)
            seconds += took
            answers += [first["choices"][0]["message"]["content"], second["choices"][0]["message"]["content"]]
    return answers, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=3, help="questions (each at three positions)")
    parser.add_argument("--batches", default="2048", help="batch sizes to try beside the default, comma-separated")
    parser.add_argument(
        "--model", default=DEFAULT, choices=list(MODELS), help=f"the embedded model (default {DEFAULT})"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"which to run, comma-separated (default all: {VARIANTS})"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    variants = set(args.variants.split(","))
    model = embedded_model(args.model)
    served = {"model_path": bundled_model_path(model.name), "alias": model.alias}
    cases = prompts(args.cases)
    print(f"{model.name}: {len(cases)} prompts; cores {len(os.sched_getaffinity(0))}", flush=True)
    rows: dict[str, dict[str, Any]] = {}
    base, wall = one_server(cases, **served)
    rows["default"] = {**speeds(base), "wall_s": wall, "same_answers": len(cases)}
    tokens = statistics.mean(r.prompt_tokens for r in base)
    rows["default"]["prompt_s_per_900_tokens"] = 900 / rows["default"]["prompt_tokens_per_s"]
    for size in [int(b) for b in args.batches.split(",") if b] if "batch" in variants else []:
        results, wall = one_server(cases, batch=size, **served)
        same = sum(a.answer == b.answer for a, b in zip(base, results, strict=True))
        rows[f"batch-{size}"] = {**speeds(results), "wall_s": wall, "same_answers": same}
    if len(os.sched_getaffinity(0)) >= 2 and "two-processes" in variants:
        results, wall = two_processes(cases, **served)
        same = sum(a.answer == b.answer for a, b in zip(base, results, strict=True))
        rows["two-processes"] = {**speeds(results), "wall_s": wall, "same_answers": same}
    if "reuse-prompt" in variants:
        fresh, fresh_s = reuse(cases, reuse_prompt=False, **served)
        kept, kept_s = reuse(cases, reuse_prompt=True, **served)
        same = sum(a == b for a, b in zip(fresh, kept, strict=True))
        rows["reuse-prompt"] = {"second_request_s": kept_s, "second_request_s_fresh": fresh_s, "same_answers": same,
                                "answers": len(fresh)}  # fmt: skip
    print(f"mean prompt: {tokens:.0f} tokens; answers compared with default's, prompt by prompt")
    print(
        f"a 900-token prompt: {rows['default']['prompt_s_per_900_tokens']:.1f} s to evaluate, plus "
        f"{1 / rows['default']['generated_tokens_per_s']:.2f} s per generated token"
    )
    print(f"{'variant':<16}{'prompt tok/s':>14}{'generated tok/s':>17}{'wall s':>9}{'same answers':>14}")
    for name, row in rows.items():
        if name == "reuse-prompt":
            continue
        print(
            f"{name:<16}{row['prompt_tokens_per_s']:>14.0f}{row['generated_tokens_per_s']:>17.1f}"
            f"{row['wall_s']:>9.1f}{row['same_answers']:>9} of {len(cases)}"
        )
    row = rows.get("reuse-prompt")
    if row:
        print(
            f"reuse-prompt: the block-added request {row['second_request_s']:.1f} s in all against "
            f"{row['second_request_s_fresh']:.1f} s from the first token; {row['same_answers']} of {row['answers']} "
            "answers the same"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
