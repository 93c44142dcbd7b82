"""`contextlift eval` says what a run will send before it sends anything: cases, requests, and per pipeline calls
and estimated tokens; `--dry-run` prints only that; a large run against an upstream that is not on this machine
asks first on a terminal and otherwise needs `--yes`; `--port` chooses the in-process proxy's port."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from contextlift.eval.command import EvalError
from contextlift.eval.cost import CONFIRM_ABOVE, _prompt_tokens, confirmed, estimate
from contextlift.eval.local_proxy import proxy_in_process
from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.runner import jobs
from contextlift.eval.sources import find_sources
from contextlift.proxy import Settings
from contextlift.proxy.cli import main
from contextlift.strategies import build_registry, parse_selection


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_dry_run_prints_cases_requests_and_tokens_per_pipeline_and_sends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No upstream is reachable at this address: a dry run that sent anything would fail.
    argv = ["eval", "--dry-run", "--profile", "quick", "--upstream", "http://unreachable.invalid/v1",
            "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    plan = make_plan("quick")
    cases, _ = build_cases(plan, find_sources(None, None))
    work = jobs(cases, plan.strategies, reasked=30)
    assert out.startswith(f"{len(cases):,} cases, {len(work):,} requests through http://unreachable.invalid/v1")
    rows = {line.split("  ")[1].strip(): line for line in out.splitlines() if line.startswith("  ")}
    assert {"none", "filter, reorder", "chain", "medoid; k=3", "none (re-asked)", "total"} <= set(rows)
    assert f"{len(work):,}" in rows["total"]
    assert not (tmp_path / "r").exists()


def test_the_estimate_counts_each_pipelines_calls(tmp_path: Path) -> None:
    plan = make_plan("quick", tasks=["litm-qa"], strategies=["none", "medoid; k=3", "recite"])
    cases, _ = build_cases(plan, find_sources(None, None))
    cost = {p.strategy: p for p in estimate(cases, jobs(cases, plan.strategies)).pipelines}
    assert cost["none"].calls == cost["none"].requests
    assert cost["medoid; k=3"].calls == 3 * cost["medoid; k=3"].requests
    assert cost["recite"].calls == 2 * cost["recite"].requests
    assert cost["medoid; k=3"].prompt_tokens == 3 * cost["recite"].prompt_tokens / 2  # the same cases, three calls


def test_the_estimate_counts_a_chain_by_the_chunks_each_case_needs() -> None:
    # The quick profile's contexts fit one chunk: a worker and the manager, not max_chunks + 1 calls each.
    plan = make_plan("quick", tasks=["litm-qa"], strategies=["none", "chain"])
    cases, _ = build_cases(plan, find_sources(None, None))
    cost = {p.strategy: p for p in estimate(cases, jobs(cases, plan.strategies)).pipelines}
    assert cost["chain"].calls == 2 * cost["chain"].requests
    assert cost["chain"].prompt_tokens == 2 * sum(_prompt_tokens(c) for c in cases if c.position is not None)


def test_the_estimate_counts_a_repeated_prompt_twice() -> None:
    plan = make_plan("quick", tasks=["litm-qa"], strategies=["none", "repeat"])
    cases, _ = build_cases(plan, find_sources(None, None))
    cost = {p.strategy: p for p in estimate(cases, jobs(cases, plan.strategies)).pipelines}
    shaped = [c for c in cases if c.position is not None]
    assert cost["repeat"].calls == cost["repeat"].requests == len(shaped)
    # `none` also answers the baselines; per shaped case, repeat's prompt is counted twice.
    assert cost["repeat"].prompt_tokens == 2 * sum(_prompt_tokens(c) for c in shaped)


def test_the_quick_profile_tries_every_built_in_strategy() -> None:
    tried = {step.name for text in make_plan("quick").strategies for step in parse_selection(text)}
    assert tried == set(build_registry().names())


def test_a_large_run_against_a_remote_upstream_needs_yes_and_sends_nothing_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "r")
    argv = ["eval", "--upstream", "http://paid-api.invalid/v1", "--model", "m", "--tasks", "litm-qa",
            "--samples", "300", "--strategies", "none", "--strategies", "reorder", "--out", out]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "requests through" in err
    assert "requests to a remote upstream: pass --yes to send them" in err
    cache = tmp_path / "r" / "responses.jsonl"
    assert not cache.exists() or not cache.read_text()  # nothing was sent, so nothing cached


@pytest.mark.parametrize(("answer", "expected"), [("y", True), ("yes", True), ("", False), ("n", False)])
def test_on_a_terminal_a_large_remote_run_asks_first(answer: str, expected: bool) -> None:
    plan = make_plan("quick", tasks=["litm-qa"], samples=["300"])
    cases, _ = build_cases(plan, find_sources(None, None))
    cost = estimate(cases, jobs(cases, plan.strategies))
    assert cost.requests > CONFIRM_ABOVE
    asked: list[str] = []
    assert (
        confirmed(cost, local=False, yes=False, stdin=Terminal(), ask=lambda q: asked.append(q) or answer) is expected
    )
    assert asked[0].startswith(f"Send {cost.requests:,} requests")
    assert confirmed(cost, local=True, yes=False, stdin=io.StringIO()) is True  # the embedded or a loopback model
    assert confirmed(cost, local=False, yes=True, stdin=io.StringIO()) is True
    assert confirmed(cost, local=False, yes=False, stdin=io.StringIO()) is None


def test_the_in_process_proxy_takes_the_port_asked_and_says_when_it_is_taken() -> None:
    settings = Settings(upstream_url="http://127.0.0.1:9/v1", log_level="warning")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with proxy_in_process(settings, port) as proxy:
        assert proxy.url == f"http://127.0.0.1:{port}/v1"
        assert proxy.upstream_identity is None
        with pytest.raises(EvalError, match=f"--port {port}: "), proxy_in_process(settings, port):
            pass
