"""`contextlift eval` says how long a run will take before the bulk of it: at the upstream's speed fitted on the
answers the cache holds, or on a few of the run's own requests sent first (which the run then reuses, so no
request is sent twice); a pipeline is priced as a measured multiple of `none` on the same cases, a cached answer
costs no time, and a dry run reads the speed from the cache it would use and sends nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextlift.eval import command
from contextlift.eval.cache import Answer
from contextlift.eval.cases import Case
from contextlift.eval.cost import JobCost
from contextlift.eval.timing import (
    Observation,
    Speed,
    calibration_jobs,
    estimate_time,
    fit,
    read_observations,
    relative_cost,
)
from contextlift.proxy.cli import main
from tests.serving import fake_upstream_url, request_body

PER_CALL, PER_PROMPT_TOKEN, PER_COMPLETION_TOKEN = 0.002, 0.00002, 0.0005
"""The scripted upstream's speed: what it sleeps for a call, a prompt token and a completion token."""


def observation(strategy: str, calls: int, prompt: int, completion: int) -> Observation:
    seconds = calls * 0.25 + prompt * 0.01 + completion * 0.05
    return Observation(strategy, calls, prompt, completion, seconds)


def test_the_fit_recovers_an_upstreams_speed() -> None:
    observations = [observation("none", c, p, k) for c, p, k in [(1, 900, 10), (1, 300, 64), (3, 2700, 30), (2, 50, 5)]]
    speed = fit(observations, "here")
    assert speed is not None
    assert speed.per_call_s == pytest.approx(0.25)
    assert speed.per_prompt_token_s == pytest.approx(0.01)
    assert speed.per_completion_token_s == pytest.approx(0.05)
    assert "prompt tokens 100/s, completion tokens 20/s, 0.25 s a call besides; fitted on 4 answers here" in (
        speed.describe()
    )


def test_the_fit_keeps_every_coefficient_at_least_zero() -> None:
    # Longer completions answered faster: unconstrained, least squares gives completion tokens a negative cost.
    observations = [Observation("none", 1, p, k, s) for p, k, s in [(100, 60, 1.0), (500, 10, 5.2), (900, 5, 9.1)]]
    speed = fit(observations, "here")
    assert speed is not None
    assert min(speed.per_call_s, speed.per_prompt_token_s, speed.per_completion_token_s) >= 0
    assert speed.per_prompt_token_s > 0


def test_no_speed_from_too_few_answers_or_failed_ones() -> None:
    assert fit([observation("none", 1, 100, 5)] * 2, "here") is None
    failed = Answer("k", "none", True, "", 1.0, {"prompt_tokens": 5, "completion_tokens": 1}, 1, error="boom")
    assert Observation.of(failed) is None
    assert Observation.of(Answer("k", "none", True, "a", None, {"prompt_tokens": 5}, 1)) is None


def test_a_pipeline_is_priced_as_its_measured_multiple_of_none_and_a_cached_request_takes_no_time() -> None:
    speed = Speed(0.0, 0.01, 0.0, 10, "here")
    # chain against none on the same two cases: 3.0 s against 1.0 s, and 6.0 s against 2.5 s.
    relative = relative_cost([("chain", 3.0, 1.0), ("chain", 6.0, 2.5), ("none", 1.0, 1.0)])
    assert relative == {"none": 1.0, "chain": pytest.approx(9.0 / 3.5)}
    none = JobCost("none", 1, 400, 10, 400, 10)
    chain = JobCost("chain", 17, 17 * 400, 170, 400, 10)
    fact = JobCost("fact", 4, 1600, 40, 400, 10)
    estimate = estimate_time([(none, False), (none, True), (chain, False), (fact, False)], speed, relative)
    seconds = {p.strategy: p.seconds for p in estimate.pipelines}
    assert seconds["none"] == pytest.approx(4.0)  # the cached one adds nothing
    assert seconds["chain"] == pytest.approx(4.0 * relative["chain"])  # not 17 calls of the whole prompt
    assert seconds["fact"] == pytest.approx(16.0)  # no answer of fact: its estimated tokens
    assert estimate.cached == 1
    assert {p.strategy for p in estimate.pipelines if not p.measured} == {"fact"}
    text = estimate.render()
    assert text.startswith("time: about 30 s at the upstream's speed")  # 4 + 4 x 2.57 + 16
    assert "1 requests answered from the cache take none" in text
    assert [line.split() for line in text.splitlines()[2:5]] == [
        ["none", "4", "s"],
        ["chain", "10", "s"],
        ["fact", "16", "s", "(high)"],
    ]
    assert (
        text.splitlines()[5] == "  (high): no answer of the pipeline yet, so priced from its estimated calls and tokens"
    )


def case(size: int, position: int | None = 0) -> Case:
    return Case("litm-qa", "easy", size, position, 0, "x" * size, ("a",), "best_subspan_em", 8)


def test_the_calibration_asks_none_at_every_size_it_needs_first_then_each_pipeline_on_its_smallest_case() -> None:
    a, b, c, d, oracle, special = case(300), case(100), case(900), case(500), case(10, None), case(700, 1)
    work = [(x, s) for x in (a, b, c, d) for s in ("none", "reorder", "chain")]
    work += [(oracle, "none"), (a, "none (re-asked)")]  # a baseline runs `none` alone; the A/A arm is left out
    work += [(special, "none"), (special, "medoid; permute=off")]  # a pipeline of one case: measured on that one
    sizes = {x.key: x.size for x in (a, b, c, d, oracle, special)}
    chosen = [(x.size, s) for x, s in calibration_jobs(work, sizes, {"none (re-asked)"})]
    # `none` first, so that a timing phase cut at its bound after three answers still fits the speed on three sizes.
    assert chosen == [
        (100, "none"),
        (700, "none"),
        (500, "none"),
        (900, "none"),
        (100, "reorder"),
        (100, "chain"),
        (700, "medoid; permute=off"),
    ]


def scripted_upstream(sent: list[str]) -> Any:
    """A fake upstream that takes time in proportion to the prompt and completion, and counts what it is sent."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = json.loads(await request_body(receive) or b"{}")
        if scope["path"].endswith("/models"):
            payload: dict[str, Any] = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        else:
            prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
            sent.append(body["messages"][-1]["content"][-80:])
            await asyncio.sleep(PER_CALL + prompt * PER_PROMPT_TOKEN + 3 * PER_COMPLETION_TOKEN)
            payload = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "fake-model",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "one two"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 3, "total_tokens": prompt + 3},
            }
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})

    return app


def small_run(url: str, out: Path, positions: str, *strategies: str) -> list[str]:
    """The command line of a small litm-qa run against `url` (10 documents, 2 samples, nothing re-asked or retried)."""
    argv = ["eval", "--upstream", url, "--tasks", "litm-qa", "--sizes", "litm-qa=10", "--positions", positions,
            "--samples", "2", "--reasked", "0", "--retries", "0", "--out", str(out)]  # fmt: skip
    return argv + [flag for strategy in strategies for flag in ("--strategies", strategy)]


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[str]]]:
    sent: list[str] = []
    with fake_upstream_url(scripted_upstream(sent)) as url:
        yield url, sent


def test_a_run_times_the_upstream_on_its_own_requests_first_and_sends_none_twice(
    upstream: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, sent = upstream
    argv = small_run(url, tmp_path / "r", "0%,50%,100%", "none", "reorder", "recite")
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    requests = [json.loads(line) for line in (tmp_path / "r" / "responses.jsonl").read_text().splitlines()]
    assert "timing the upstream on up to 5 of the run's own requests" in err
    assert "time: about" in err
    table = err[err.index("time: about") :].splitlines()
    assert [line.split()[0] for line in table[2:5]] == ["none", "reorder", "recite"]
    assert "(high)" not in err  # every pipeline was measured before the estimate
    # recite asks twice; every other request once: no request of the calibration was sent again.
    assert len(sent) == sum(2 if r["strategy"] == "recite" else 1 for r in requests)
    assert len({r["key"] for r in requests}) == len(requests)

    # Run again: everything cached, nothing to time, nothing sent.
    before = len(sent)
    assert main(argv) == 0
    assert "timing the upstream" not in capsys.readouterr().err
    assert len(sent) == before


def test_the_timing_phase_stops_at_its_bound_once_three_have_answered(
    upstream: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = upstream
    monkeypatch.setattr(command, "TIMING_BOUND_S", 0.0)  # the bound reached at once: only the fit's three answers
    argv = small_run(url, tmp_path / "r", "0%,50%,100%", "none", "reorder", "recite")
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    timing = [line for line in err.splitlines() if "timing the upstream: " in line]
    assert [line.split(": ", 2)[2].split(",")[0] for line in timing[:3]] == [f"{n} of 5 requests" for n in (1, 2, 3)]
    assert timing[3].startswith("contextlift eval: timing the upstream: stopped at its bound: 3 of 5 requests in ")
    assert len(timing) == 4
    # The three were `none`'s, at three sizes: the speed is fitted, the pipelines not timed are priced from tokens.
    table = err[err.index("time: about") :].splitlines()
    assert [line.split()[0] for line in table[2:5]] == ["none", "reorder", "recite"]
    assert [line.endswith("(high)") for line in table[2:5]] == [False, True, True]


def test_a_dry_run_reads_the_speed_from_the_cache_it_would_use_and_sends_nothing(
    upstream: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, sent = upstream
    common = ["--tasks", "litm-qa", "--sizes", "litm-qa=10", "--positions", "0%,100%", "--samples", "2",
              "--reasked", "0", "--out", str(tmp_path / "r"),
              "--strategies", "none", "--strategies", "reorder"]  # fmt: skip
    assert main(["eval", "--dry-run", "--upstream", url, *common]) == 0
    assert "time: unknown, no answers recorded in" in capsys.readouterr().out
    assert main(["eval", "--upstream", url, "--retries", "0", *common]) == 0
    answered = len(sent)
    cache = tmp_path / "r" / "responses.jsonl"
    assert len(read_observations(cache)) == answered
    more = [*common, "--samples", "3"]
    assert main(["eval", "--dry-run", "--upstream", url, "--model", "fake-model", *more]) == 0
    out = capsys.readouterr().out
    assert len(sent) == answered  # a dry run sends nothing
    assert "at the upstream's speed (prompt tokens" in out
    assert f"fitted on {answered} answers recorded in {cache}" in out
    assert f"{answered} requests answered from the cache take none" in out
    assert main(["eval", "--dry-run", "--upstream", url, *more]) == 0
    out = capsys.readouterr().out
    assert "cached answers not subtracted, and each pipeline's multiple of none read over the whole cache" in out


def test_a_torn_or_foreign_cache_line_is_no_observation(tmp_path: Path) -> None:
    cache = tmp_path / "c.jsonl"
    good = {"key": "k", "strategy": "none", "final": True, "answer": "a", "latency_s": 1.5, "upstream_calls": 1,
            "usage": {"prompt_tokens": 100, "completion_tokens": 4}}  # fmt: skip
    cache.write_text(
        "\n".join([json.dumps(good), '{"key": "k2", "latency_s": "soon"', "[1, 2]", json.dumps(good)[:40]])
    )
    assert read_observations(cache) == [Observation("none", 1, 100, 4, 1.5)]
    assert read_observations(tmp_path / "missing.jsonl") == []
