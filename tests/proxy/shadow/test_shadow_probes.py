"""Positional probes on live traffic (`shadow_probes`), the loop end to end: requests sent through the proxy with
shadow on, `contextlift shadow-report`, `contextlift policy`, `auto` reading the policy. A scripted
position-sensitive upstream (it reads only the first and last quarter of the prompt, as a model lost in the
middle would) gives a U-shaped probe table and a rule for the candidate that recovers the middle; a
position-blind one gives a flat table and no rule. The sink holds no needle or document text unless capture is
on."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.eval.tasks.litm import Passage, qa_prompt
from contextlift.proxy.cli import main
from tests.fakes import FakeUpstream, completion
from tests.proxy.shadow.test_shadow_evaluation import metric, settle

_SEVEN_DIGITS = re.compile(r"(?<!\d)\d{7}(?!\d)")
SERVED_WITH_NONE = {"X-Context-Strategy": "none"}
PROBES = "contextlift_shadow_probes_total"
_TOPICS = ("harbour", "glacier", "orchard", "violin", "comet", "quarry", "lantern", "meadow", "falcon", "canyon")


def prompt_text(request: httpx.Request) -> str:
    messages = json.loads(request.content)["messages"]
    return "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))


def lost_in_the_middle(request: httpx.Request) -> httpx.Response:
    """A fake upstream that reads only the first and last quarter of its prompt."""
    text = prompt_text(request)
    quarter = len(text) // 4
    found = _SEVEN_DIGITS.findall(text[:quarter] + "\n" + text[-quarter:])
    return httpx.Response(200, json=completion(f"The answer is {found[0]}." if found else "I cannot tell."))


def reads_everything(request: httpx.Request) -> httpx.Response:
    """A fake upstream that finds the value wherever it sits."""
    found = _SEVEN_DIGITS.findall(prompt_text(request))
    return httpx.Response(200, json=completion(f"The answer is {found[0]}." if found else "I cannot tell."))


def request_body(number: int) -> dict[str, Any]:
    """Lost in the Middle's QA prompt over nine documents of even length, different per request."""
    passages = [
        Passage(
            f"{topic.title()} {number}",
            f"The {topic} of site {number} was surveyed in spring; its notes describe "
            f"the {topic} in plain words, with nothing else of note recorded there.",
        )
        for topic in _TOPICS[:9]
    ]
    return {
        "model": "fake-model",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": qa_prompt(f"What was surveyed at site {number}?", passages)}],
    }


def run_traffic(make_client: Any, fake: FakeUpstream, answer: Any, sink: Path, requests: int, **extra: Any) -> Any:
    fake.queue(*[answer] * 2000)
    client = make_client(
        shadow_rate=1.0,
        shadow_use_client_key=True,
        shadow_strategies=["reorder"],
        shadow_probes=True,
        shadow_sink=str(sink),
        shadow_queue=100,
        shadow_calls_per_minute=100_000,
        **extra,
    )
    for number in range(requests):
        response = client.post(
            "/v1/chat/completions", json=request_body(number), headers={"X-Context-Strategy": "none"}
        )
        assert response.status_code == 200
    settle(client)
    return client


def report_and_policy(tmp_path: Path, sink: Path) -> tuple[dict[str, Any], str]:
    out = tmp_path / "report"
    assert main(["shadow-report", str(sink), "--out", str(out)]) == 0
    # --keep none: what these probes write, without the built-in rules a policy keeps by default.
    assert main(["policy", str(out), "--out", str(tmp_path / "policy.toml"), "--keep", "none"]) == 0
    return json.loads((out / "probes.json").read_text()), (tmp_path / "policy.toml").read_text()


def accuracy(group: dict[str, Any], strategy: str) -> dict[str, float]:
    return {a["position"]: a["value"] for a in group["accuracy"] if a["strategy"] == strategy}


def test_a_position_sensitive_upstream_gives_a_u_and_a_rule_where_the_ranker_finds_the_needle(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    sink = tmp_path / "shadow.jsonl"
    client = run_traffic(make_client, fake, lost_in_the_middle, sink, requests=45)
    probes, policy = report_and_policy(tmp_path, sink)
    [group] = probes["groups"]
    assert (group["model"], group["format"], group["probes"]) == ("fake-model", "litm", 45)
    assert set(group["kinds"]) == {"literal", "one-hop", "nolima"}
    # The kinds a ranker can find come first, as real questions share a word with their passage (KIND_WEIGHTS).
    assert group["kinds"]["nolima"] < group["kinds"]["literal"] + group["kinds"]["one-hop"]
    assert accuracy(group, "none") == {"first": 1.0, "middle": 0.0, "last": 1.0}
    assert group["u_depth"]["none"]["value"] == 1.0
    by_kind = group["by_kind"]
    # Where the question names the needle, the lexical ranker finds it: reorder recovers the middle every time.
    for kind in ("literal", "one-hop"):
        assert accuracy(by_kind[kind], "reorder") == {"first": 1.0, "middle": 1.0, "last": 1.0}
    [found] = group["findable"]["lift"]
    assert (found["wins"], found["losses"], found["significant"]) == (group["findable"]["probes"], 0, True)
    # Where it must make a hop, the lexical ranker scores every document alike: reorder keeps the client's order,
    # and the needle's document stays where the upstream does not read; no loss either.
    [hard] = by_kind["nolima"]["lift"]
    assert accuracy(by_kind["nolima"], "reorder") == {"first": 1.0, "middle": 0.0, "last": 1.0}
    assert (hard["wins"], hard["losses"]) == (0, 0)
    # So the rule: its lift holds where the ranker can find the evidence, and it loses nothing where it cannot.
    [rule] = tomllib.loads(policy)["rule"]
    assert rule["strategy"] == "reorder"
    assert rule["evidence"]["id"] == "report#probes/fake-model/litm/literal+one-hop/reorder"
    assert "reorder: judged on the " in policy
    assert "literal+one-hop probes where its ranker can find the needle; no significant loss on the " in policy
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Positional probes" in report
    assert "By kind (each its own Holm family):" in report
    assert "![probe accuracy by position](plots/" in report
    # Per position and pipeline, in the metrics too (45 probes: none is wrong in the middle each time).
    assert metric(client, "contextlift_shadow_probes_total", position="middle", pipeline="none", outcome="wrong") == 45


LIFT = {"strategy": "reorder", "value": 0.4, "ci95": [0.2, 0.6], "n": 36, "wins": 14, "losses": 0, "p": 1e-4,
        "p_holm": 1e-4, "family": 1, "test": "mcnemar-exact", "middle": 1.0, "detectable": 0.2,
        "significant": True, "harmful": False, "cost": {"calls_vs_none": 1.0, "p50_s_vs_none": 1.0}}  # fmt: skip


def probes_file(out: Path, nolima: dict[str, Any]) -> None:
    found = {**LIFT, "value": 0.5, "wins": 12, "n": 24}
    group = {"model": "fake-model", "format": "litm", "probes": 36, "kinds": {"literal": 24, "nolima": 12},
             "documents": [9, 9], "first": "2026-11-27T10:00:00Z", "last": "2026-11-27T11:00:00Z",
             "strategies": ["none", "reorder"], "errors": {}, "accuracy": [], "u_depth": {}, "lift": [LIFT],
             "by_kind": {"literal": {"probes": 24, "lift": [found]}, "nolima": {"probes": 12, "lift": [nolima]}},
             "findable": {"probes": 24, "lift": [found]}}  # fmt: skip
    out.mkdir()
    (out / "probes.json").write_text(json.dumps({"kind": "contextlift-shadow-probes", "groups": [group]}))


def test_a_ranked_rule_rests_on_the_probes_its_ranker_can_find_and_auto_applies_it(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    probes_file(out, {**LIFT, "value": 0.0, "wins": 0, "losses": 0, "significant": False, "p": 1.0, "p_holm": 1.0})
    assert main(["policy", str(out), "--out", str(tmp_path / "policy.toml"), "--keep", "none"]) == 0
    policy = (tmp_path / "policy.toml").read_text()
    [rule] = tomllib.loads(policy)["rule"]
    assert (rule["strategy"], rule["formats"], rule["documents"]) == ("reorder", ["litm"], [9, 9])
    assert rule["evidence"]["id"] == "report#probes/fake-model/litm/literal+one-hop/reorder"
    assert rule["evidence"]["lift"] == 0.5, "the findable probes' lift, not every probe's"
    assert "no significant loss on the 12 nolima probes (reorder (literal) lift +0.000" not in policy
    assert "no significant loss on the 12 nolima probes" in policy

    fake.queue(lost_in_the_middle)
    auto = make_client(policy_file=str(tmp_path / "policy.toml"))
    response = auto.post("/v1/chat/completions", json=request_body(99), headers={"X-Context-Strategy": "auto"})
    assert response.headers["x-context-strategy"].startswith("reorder")
    assert "report#probes/fake-model/litm/literal+one-hop/reorder" in response.headers["x-context-policy"]


def test_a_ranked_pipeline_that_loses_where_its_ranker_cannot_find_the_needle_gets_no_rule(tmp_path: Path) -> None:
    out = tmp_path / "report"
    lost = {**LIFT, "value": -0.5, "wins": 0, "losses": 10, "n": 12, "ci95": [-0.8, -0.2], "significant": False,
            "harmful": True, "p": 0.002, "p_holm": 0.002}  # fmt: skip
    probes_file(out, lost)
    assert main(["policy", str(out), "--out", str(tmp_path / "policy.toml"), "--keep", "none"]) == 0
    policy = (tmp_path / "policy.toml").read_text()
    assert "rule" not in tomllib.loads(policy)
    assert "but it loses on the 12 nolima probes" in policy


def test_the_writer_keeps_the_rules_this_run_does_not_contradict(tmp_path: Path) -> None:
    """A run that decides nothing leaves the rules in force in place (the built-in ones by default), and says how
    many pairs would decide; a rule whose requests the run covers and finds losing is dropped, with why."""
    out = tmp_path / "report"
    probes_file(out, {**LIFT, "value": 0.0, "wins": 0, "losses": 0, "significant": False, "p": 1.0, "p_holm": 1.0})
    earlier = tmp_path / "earlier.toml"
    evidence = (
        'evidence = { id = "r#x", lift = 0.2, ci95 = [0.1, 0.3], n = 90, test = "mcnemar-exact", p = 0.001, '
        'correction = "holm/1", report = "r", date = "2026-12-01" }\n'
    )
    earlier.write_text(
        "version = 1\n"
        f'[[rule]]\nid = "mine"\nmodel = "other-model*"\nformats = ["litm"]\nstrategy = "recite"\n{evidence}'
        f'[[rule]]\nid = "theirs"\nmodel = "fake-*"\nformats = ["litm"]\nstrategy = "fact"\n{evidence}'
    )
    assert main(["policy", str(out), "--out", str(tmp_path / "policy.toml"), "--keep", str(earlier)]) == 0
    text = (tmp_path / "policy.toml").read_text()
    rules = {r["id"]: r for r in tomllib.loads(text)["rule"]}
    assert set(rules) == {"mine", "probe-fake-model-litm"}, "theirs: the run wrote its own rule for fake-model/litm"
    assert "mine: kept from earlier.toml; this run did not judge its model and format." in text
    assert "theirs (from earlier.toml): dropped, this run found a rule of its own (fake-model / litm)." in text
    # By default, the built-in policy's rules stay where the run says nothing of their model.
    assert main(["policy", str(out), "--out", str(tmp_path / "fresh.toml")]) == 0
    kept = {r["id"] for r in tomllib.loads((tmp_path / "fresh.toml").read_text())["rule"]}
    assert {"smollm2-paragraphs", "smollm2-unmovable"} <= kept


def test_a_position_blind_upstream_gives_a_flat_table_and_no_rule(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    sink = tmp_path / "shadow.jsonl"
    run_traffic(make_client, fake, reads_everything, sink, requests=12)
    probes, policy = report_and_policy(tmp_path, sink)
    [group] = probes["groups"]
    assert accuracy(group, "none") == {"first": 1.0, "middle": 1.0, "last": 1.0}
    assert group["u_depth"]["none"]["value"] == 0.0
    assert [(row["wins"], row["losses"], row["significant"]) for row in group["lift"]] == [(0, 0, False)]
    assert "[[rule]]" not in policy
    assert "fake-model / litm: 12 probes from live traffic: no rule" in policy
    assert "pairs would decide it" not in policy  # no pipeline gained: there is no size to plan a run for


def test_probes_keep_no_text_without_capture_and_spend_from_the_budget(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    sink = tmp_path / "shadow.jsonl"
    run_traffic(make_client, fake, lost_in_the_middle, sink, requests=1)
    record = json.loads(sink.read_text())
    needles = ("access code", "storage unit", "spare key")
    probe_prompts = [prompt_text(r) for r in fake.requests if any(words in prompt_text(r) for words in needles)]
    # none, served (none again: run once) and reorder, each at three positions; the client's own call untouched.
    assert len(probe_prompts) == 2 * 3
    assert "access code" not in prompt_text(fake.requests[0])
    assert "storage unit" not in prompt_text(fake.requests[0])
    needle_value = _SEVEN_DIGITS.search(probe_prompts[0])
    assert needle_value is not None
    text = sink.read_text()
    assert needle_value.group() not in text
    assert "access code" not in text
    assert "storage unit" not in text
    assert "spare key" not in text
    assert "surveyed" not in text  # no document text either
    assert {(r["strategy"], r["position"]) for r in record["probe"]["runs"]} == {
        (s, p) for s in ("none", "reorder") for p in ("first", "middle", "last")
    }
    # Answers are capped: a probe asks for a number, not the client's 200 tokens.
    assert {json.loads(r.content)["max_tokens"] for r in fake.requests[-6:]} == {64}


def test_capture_keeps_the_probe_and_a_budget_too_small_for_it_drops_the_sample(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    sink = tmp_path / "shadow.jsonl"
    run_traffic(make_client, fake, lost_in_the_middle, sink, requests=1, shadow_capture=True)
    captured = json.loads(sink.read_text())["captured"]["probe"]
    assert _SEVEN_DIGITS.fullmatch(captured["value"])
    assert captured["value"] in captured["needle"]
    assert len(captured["answers"]) == 6

    fake.requests.clear()
    # Without probes a sample costs 1 + 1 + 2 calls (reorder, control, two orders); probes add 6: 4 fit, 10 not.
    small = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"],
                        shadow_probes=True, shadow_calls_per_minute=9)  # fmt: skip
    assert small.post("/v1/chat/completions", json=request_body(1)).status_code == 200
    settle(small)
    assert metric(small, "contextlift_shadow_samples_total", outcome="dropped-budget") == 1


@pytest.mark.parametrize("documents", [2])
def test_too_few_documents_run_no_probe(make_client: Any, fake: FakeUpstream, tmp_path: Path, documents: int) -> None:
    sink = tmp_path / "shadow.jsonl"
    fake.queue(*[lost_in_the_middle] * 50)
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_probes=True, shadow_sink=str(sink))
    passages = [Passage(f"T{i}", f"Some text about topic {i}.") for i in range(documents)]
    body = {"model": "m", "messages": [{"role": "user", "content": qa_prompt("Which topic?", passages)}]}
    assert client.post("/v1/chat/completions", json=body).status_code == 200
    settle(client)
    assert "probe" not in json.loads(sink.read_text())


def test_replicas_sharing_a_volume_write_a_sink_each_and_one_report_reads_them_all(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    for host in ("contextlift-7d9f-a", "contextlift-7d9f-b"):
        monkeypatch.setattr("socket.gethostname", lambda host=host: host)
        run_traffic(make_client, fake, lost_in_the_middle, shared / "{host}.jsonl", requests=6)
    assert sorted(p.name for p in shared.iterdir()) == ["contextlift-7d9f-a.jsonl", "contextlift-7d9f-b.jsonl"]
    probes, policy = report_and_policy(tmp_path, shared)
    [group] = probes["groups"]
    assert group["probes"] == 12
    assert "fake-model / litm: 12 probes from live traffic" in policy


def test_the_served_rankings_margin_is_kept_and_reported(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    sink = tmp_path / "shadow.jsonl"
    fake.queue(*[lost_in_the_middle] * 200)
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_sink=str(sink),
                         shadow_strategies=["none"], shadow_calls_per_minute=100_000)  # fmt: skip
    for number in range(4):
        headers = {"X-Context-Strategy": "reorder; ranker=lexical" if number % 2 else "none"}
        assert client.post("/v1/chat/completions", json=request_body(number), headers=headers).status_code == 200
    settle(client)
    records = [json.loads(line) for line in sink.read_text().splitlines() if '"served"' in line]
    margins = {r["served"]: r["served_margin"] for r in records}
    assert margins["none"] is None
    assert 0.0 <= margins["reorder; ranker=lexical"] <= 1.0
    out = tmp_path / "report"
    assert main(["shadow-report", str(sink), "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "## Served rankings" in report
    assert "2 served requests ranked their documents" in report
