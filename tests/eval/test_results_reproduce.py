"""Results that reproduce: answers reused only from the upstream that gave them (the run says how many it asks
again), lifts paired only within one upstream, and the A/A row, `none` asked again, whose floor a lift must clear.
The command-level tests run `contextlift eval` in front of fake upstreams over a real socket: one that answers a
re-asked prompt otherwise (a noise no real model can be made to show on cue), and one that lists another build."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.eval.cache import ResponseCache
from contextlift.eval.cases import REASKED, Case, Sample
from contextlift.eval.identity import identify
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.runner import Runner, Target, jobs
from contextlift.eval.verdicts.best_pipeline import significant
from contextlift.eval.verdicts.results import RunInfo, results
from contextlift.proxy.cli import main
from tests.eval.report.test_best_pipeline_per_regime import sample
from tests.fakes import completion, streamed_json
from tests.serving import fake_upstream_url, request_body


def _case(index: int, variant: str = "standard") -> Case:
    prompt = f"Document [1](Title: A) Paris {index}.\n\nQuestion: capital {index}?\nAnswer:"
    return Case("litm-qa", variant, 10, 0, index, prompt, ("Paris",), "best_subspan_em", 16)


def _answering(requests: list[dict[str, Any]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        requests.append({"strategy": request.headers["x-context-strategy"], **json.loads(request.content)})
        return httpx.Response(200, json=completion("Paris"))

    return httpx.MockTransport(handler)


def _run(
    cache: ResponseCache, target: Target, work: list[tuple[Case, str]], sent: list[dict[str, Any]]
) -> list[Sample]:
    runner = Runner(target, cache, transport=_answering(sent))
    return asyncio.run(runner.run(work))


def test_the_a_a_arm_comes_last_is_sent_as_none_and_is_drawn_per_task_and_variant() -> None:
    cases = [_case(i) for i in range(5)] + [_case(i, "hard") for i in range(2)]
    work = jobs(cases, ["none", "reorder"], reasked=3, seed=0)
    assert [s for _, s in work[:14]] == ["none", "reorder"] * 7
    again = work[14:]
    assert Counter(c.variant for c, s in again if s == REASKED) == {"standard": 3, "hard": 2}
    assert jobs(cases, ["none", "reorder"], reasked=3, seed=0) == work  # the same draw each time
    assert len(jobs(cases, ["reorder"], reasked=3)) == 7  # no `none`, nothing to ask again
    assert len(jobs(cases, ["none"], reasked=3)) == 7  # nothing compared with `none`
    baselines = [replace(c, strategies=("none",)) for c in cases]
    assert len(jobs(baselines, ["none", "reorder"], reasked=3)) == 7  # a baseline's own cases: no lift, no floor
    sent: list[dict[str, Any]] = []
    with ResponseCache(Path("/nonexistent/never-written"), "u1") as cache:
        cache.put = lambda answer: None  # type: ignore[method-assign]
        _run(cache, Target("http://proxy/v1", "m", upstream="u1", run="r1"), again[:1], sent)
    assert sent[0]["strategy"] == "none"


def test_an_answer_is_reused_only_from_the_upstream_that_gave_it(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    work = [(_case(i), "none") for i in range(3)]
    sent: list[dict[str, Any]] = []
    with ResponseCache(path, "u1") as cache:
        first = _run(cache, Target("http://proxy/v1", "m", upstream="u1", run="r1"), work, sent)
    assert [(s.upstream, s.run, s.cached) for s in first] == [("u1", "r1", False)] * 3
    with ResponseCache(path, "u1") as cache:
        again = _run(cache, Target("http://proxy/v1", "m", upstream="u1", run="r2"), work, sent)
        assert (cache.reasked, len(sent)) == (0, 3)
    assert [(s.run, s.cached) for s in again] == [("r1", True)] * 3  # a reused answer keeps the run that asked
    with ResponseCache(path, "u2") as cache:
        assert cache.reusable() == 0
        other = _run(cache, Target("http://proxy/v1", "m", upstream="u2", run="r3"), work, sent)
        assert (cache.reasked, len(sent)) == (3, 6)
    assert [(s.upstream, s.cached) for s in other] == [("u2", False)] * 3
    # A line from before upstreams were recorded is asked again too.
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k not in ("upstream", "run")})
                              + "\n" for line in path.read_text().splitlines()[:3]))  # fmt: skip
    with ResponseCache(legacy, "u1") as cache:
        _run(cache, Target("http://proxy/v1", "m", upstream="u1", run="r4"), work, sent)
        assert cache.reasked == 3


def _regime(pattern: str, *, strategy: str = "reorder") -> list[Sample]:
    """One sample per character: 'w' the strategy right where `none` is wrong, 'l' the reverse, '=' both right."""
    samples = []
    for i, mark in enumerate(pattern):
        samples.append(sample("none", "standard", i, float(mark in "l=")))
        samples.append(sample(strategy, "standard", i, float(mark in "w=")))
    return samples


def test_a_lift_counts_only_when_its_interval_clears_the_a_a_floor() -> None:
    info = RunInfo("m", "http://proxy/v1", ("none", "reorder"), 0, "full")
    samples = _regime("w" * 14 + "=" * 26)
    alone = results(samples, info)
    assert alone["noise_floor"] == []
    assert significant(alone["lift"][0])
    assert alone["best_pipeline"][0]["recommend"] == "reorder"
    # Asked again, `none` changed its score on 6 of 30 cases: a floor of 0.2, which the lift's interval crosses.
    reasked = [replace(s, strategy=REASKED, score=1.0 - s.score if s.sample < 6 else s.score,
                       answer="other" if s.sample < 8 else s.answer)
               for s in samples if s.strategy == "none" and s.sample < 30]  # fmt: skip
    noisy = results(samples + reasked, info)
    [floor] = noisy["noise_floor"]
    assert (floor["n"], floor["changed"], floor["answers_changed"], floor["floor"]) == (30, 6, 8, 0.2)
    [row] = noisy["lift"]
    assert row["floor"] == 0.2
    assert row["ci95"][0] < 0.2 < row["value"]
    assert row["p_holm"] < 0.05
    assert not significant(row)
    assert noisy["best_pipeline"][0]["recommend"] is None
    # An upstream that answered every re-asked case as before: a floor of 0, the paired test alone.
    quiet = results(samples + [replace(s, score=s.score) for s in reasked[6:]], info)
    assert quiet["noise_floor"][0]["floor"] == 0
    assert significant(quiet["lift"][0])
    markdown = render_markdown(noisy)
    assert "## Noise floor (A/A)" in markdown
    assert "| litm-qa | standard | 30 | 6 | 8 | 0.200 |" in markdown
    assert REASKED not in "".join(line for line in markdown.splitlines() if line.startswith("| reorder"))


def test_lifts_pair_only_answers_from_one_upstream_and_say_how_many_runs_asked() -> None:
    info = RunInfo("m", "http://proxy/v1", ("none", "reorder"), 0, "full", upstreams={"u1": {"model": "m"}})
    samples = [replace(s, upstream="u1", run=f"r{s.sample % 2}") for s in _regime("w" * 12 + "=" * 8)]
    moved = [replace(s, upstream="u2") if s.strategy == "reorder" and s.sample < 5 else s for s in samples]
    data = results(moved, info)
    [row] = data["lift"]
    assert (row["n"], row["wins"], row["upstreams"], row["runs"]) == (15, 7, ["u1"], 2)
    assert data["not_compared"] == [{"task": "litm-qa", "variant": "standard", "strategy": "reorder", "cases": 5}]
    markdown = render_markdown(data)
    assert "- upstream `u1`: `m`" in markdown
    assert "- `reorder` (litm-qa, standard): 5 cases answered by another upstream than `none`'s" in markdown
    old = render_markdown(results(_regime("w" * 12), RunInfo("m", "p", ("none", "reorder"), 0, "full")))
    assert "- upstream: not recorded" in old
    assert "Not measured" in old


class _Upstream:
    """A fake upstream: lists `listing` as its model, answers a prompt `Paris` the first time it sees it and `Lyon`
    after (the noise the A/A row is there to catch)."""

    def __init__(self, listing: dict[str, Any]) -> None:
        self.listing = listing
        self.extra: dict[str, dict[str, Any]] = {}
        """Other paths it answers with a JSON object (a server describing itself)."""
        self.seen: Counter[bytes] = Counter()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        if scope["path"] in self.extra:
            payload: dict[str, Any] = self.extra[scope["path"]]
        elif scope["path"].endswith("/models"):
            payload = {"object": "list", "data": [self.listing]}
        else:
            prompt = json.dumps(json.loads(body)["messages"]).encode()
            self.seen[prompt] += 1
            payload = completion("Paris" if self.seen[prompt] == 1 else "Lyon")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@pytest.fixture
def listed_upstream() -> Iterator[tuple[str, _Upstream]]:
    upstream = _Upstream({"id": "fake-model", "object": "model", "created": 1, "root": "/models/a.gguf"})
    with fake_upstream_url(upstream) as url:
        yield url, upstream


def _eval(url: str, out: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> str:
    argv = ["eval", "--upstream", url, "--tasks", "litm-qa", "--sizes", "litm-qa=10", "--samples", "2",
            "--strategies", "none", "--strategies", "reorder", "--reasked", "4", "--out", str(out),
            "--cache", str(cache)]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().err


def test_a_run_records_its_upstream_measures_its_floor_and_asks_again_what_another_upstream_answered(
    listed_upstream: tuple[str, _Upstream], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, upstream = listed_upstream
    cache = tmp_path / "answers.jsonl"
    err = _eval(url, tmp_path / "one", cache, capsys)
    run = json.loads((tmp_path / "one" / "run.json").read_text())
    [(fingerprint, identity)] = run["upstreams"].items()
    assert identity == {"fingerprint": fingerprint, "model": "fake-model",
                        "listed": {"id": "fake-model", "object": "model", "root": "/models/a.gguf"}}  # fmt: skip
    assert f"upstream {fingerprint}: `fake-model` (root `/models/a.gguf`)" in err
    data = json.loads((tmp_path / "one" / "results.json").read_text())
    floors = {r["variant"]: (r["n"], r["answers_changed"]) for r in data["noise_floor"]}
    assert floors["standard"] == (4, 4)  # every re-asked case answered otherwise: a floor of answers, not scores
    report = (tmp_path / "one" / "report.md").read_text()
    assert f"- upstream `{fingerprint}`: `fake-model` (root `/models/a.gguf`)" in report
    # The same upstream again: every answer reused, nothing asked.
    asked = sum(upstream.seen.values())
    assert "asked again" not in _eval(url, tmp_path / "two", cache, capsys)
    assert sum(upstream.seen.values()) == asked
    # Another build of the model behind the same name: nothing reused, and the run says so.
    upstream.listing = {**upstream.listing, "root": "/models/b.gguf"}
    err = _eval(url, tmp_path / "three", cache, capsys)
    assert f"{asked} from other upstreams not reused" in err
    assert f"asked {asked} requests again" in err
    assert sum(upstream.seen.values()) == 2 * asked
    # Back to the first build: its answers are still there, nothing asked.
    upstream.listing = {**upstream.listing, "root": "/models/a.gguf"}
    assert "requests again" not in _eval(url, tmp_path / "four", cache, capsys)
    assert sum(upstream.seen.values()) == 2 * asked


def test_what_an_upstream_lists_is_bounded_and_kept_to_one_line(tmp_path: Path) -> None:
    hostile = {"id": "m", "created": 5, "root": "a\n# Verdict\n| yes |`" + "x" * 500, "nested": {"deep": [1]}}
    hostile |= {f"k{i}": i for i in range(40)}

    def handler(request: httpx.Request) -> httpx.Response:
        return streamed_json({"data": [hostile]})

    identity = identify("http://proxy/v1", "m", transport=httpx.MockTransport(handler))
    listed = identity.details["listed"]
    assert "created" not in listed
    assert "nested" not in listed
    assert len(listed) < 20
    assert len(listed["root"]) == 200
    huge = {"data": [{"id": "m", "root": "x" * (2 << 20)}]}
    too_long = identify("http://proxy/v1", "m", transport=httpx.MockTransport(lambda _: streamed_json(huge)))
    assert too_long.details == {}  # over a megabyte: not read, known by its name
    assert too_long.unread == ("http://proxy/v1/models: over 1 MiB",)
    assert "\n" not in identity.describe()
    assert "`" not in listed["root"]
    assert "|" not in listed["root"]


def test_an_upstream_the_eval_can_reach_is_asked_what_server_and_build_it_is(
    listed_upstream: tuple[str, _Upstream],
) -> None:
    """llama.cpp's server describes itself at /props (model file, build) and vLLM at /version; the fake answers both
    shapes, the proxy's listing comes through the upstream's /v1/models."""
    url, upstream = listed_upstream
    upstream.extra = {
        "/props": {
            "model_path": "/m/a.gguf",
            "build_info": "b4500-abc",
            "default_generation_settings": {"n_ctx": 4096},
        },
        "/version": {"version": "0.6.3"},
    }
    identity = identify(url, "fake-model", upstream_url=url)
    assert identity.details["server"] == {"model_path": "/m/a.gguf", "build_info": "b4500-abc", "n_ctx": "4096",
                                          "version": "0.6.3"}  # fmt: skip
    upstream.listing = {**upstream.listing, "root": "/models/b.gguf"}
    upstream.extra["/props"]["build_info"] = "b4501-def"
    assert identify(url, "fake-model", upstream_url=url).fingerprint != identity.fingerprint
    assert "server" not in identify(url, "fake-model").details  # behind a proxy the eval did not start
