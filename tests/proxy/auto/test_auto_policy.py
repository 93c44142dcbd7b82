"""`auto`: the policy's rules matched on each condition, the chosen pipeline applied with its evidence named in
`X-Context-Policy`, a bad policy refused at start and on reload (the one in force stays), caps binding every
rule, an explicit selection winning over `auto`, and `none` (said so) where no rule matches."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy import SettingsError
from contextlift.proxy.policy import BUILT_IN, Policy, PolicyError, RequestFeatures, load_policy
from contextlift.strategies import Pipeline
from tests.fakes import FakeUpstream

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is about topic {i}" for i in range(1, 6))
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which fact comes first?\nAnswer:"}],
}
EVIDENCE = 'evidence = { id = "r#litm-qa/reorder", lift = 0.1, ci95 = [0.04, 0.19], n = 90, report = "r", date = "d" }'


def policy_text(*rules: str) -> str:
    return "version = 1\n" + "".join(f"\n[[rule]]\n{rule}\n" for rule in rules)


def rule(id: str, strategy: str = "reorder", **conditions: Any) -> str:
    lines = [f'id = "{id}"', f'strategy = "{strategy}"', *(f"{k} = {json.dumps(v)}" for k, v in conditions.items())]
    return "\n".join(lines) + ("\n" + EVIDENCE if strategy != "none" else "")


def written(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def loaded(tmp_path: Path, *rules: str) -> Policy:
    return load_policy(written(tmp_path, policy_text(*rules)), lambda text, param: Pipeline())


def features(**given: Any) -> RequestFeatures:
    values = {"model": "gpt-4o", "documents": 10, "document_tokens": 1000, "format": "litm", "stream": False}
    return RequestFeatures(**{**values, **given})


@pytest.mark.parametrize(
    ("condition", "matching", "other"),
    [
        ({"model": "gpt-4o*"}, {"model": "gpt-4o-mini"}, {"model": "llama-3"}),
        ({"documents": [5, 20]}, {"documents": 5}, {"documents": 21}),
        ({"document_tokens": [0, 2000]}, {"document_tokens": 2000}, {"document_tokens": 2001}),
        ({"formats": ["litm", "xml"]}, {"format": "xml"}, {"format": "paragraphs"}),
        (
            {"formats": ["none: ambiguous-chunks"]},
            {"format": "none", "reading": "none: ambiguous-chunks"},
            {"format": "none", "reading": "none: unproven-template"},
        ),
        ({"formats": ["none"]}, {"format": "none", "reading": "none: unproven-template"}, {"format": "litm"}),
        ({"stream": False}, {"stream": False}, {"stream": True}),
    ],
)
def test_each_condition_matches_and_refuses(
    tmp_path: Path, condition: dict[str, Any], matching: dict[str, Any], other: dict[str, Any]
) -> None:
    policy = loaded(tmp_path, rule("first", **condition), rule("rest", "none"))
    assert policy.choose(features(**matching)).rule == "first"
    assert policy.choose(features(**other)).rule == "rest"


def test_a_miss_on_a_reason_says_the_reason(tmp_path: Path) -> None:
    policy = loaded(tmp_path, rule("unmovable", "focus", formats=["none: ambiguous-chunks"]))
    miss = policy.choose(features(format="none", reading="none: unproven-template"))
    assert "failed=format none: unproven-template not in [none: ambiguous-chunks]" in miss.header


def test_rules_are_tried_in_order_and_no_match_says_so(tmp_path: Path) -> None:
    policy = loaded(tmp_path, rule("small", documents=[0, 4]), rule("large", documents=[5, 100]))
    assert policy.choose(features(documents=3)).rule == "small"
    assert policy.choose(features(documents=10)).rule == "large"
    none = policy.choose(features(documents=500))
    assert (none.rule, none.pipeline) == ("none", Pipeline())
    assert none.header == (
        "none; reason=no-rule-matched; nearest=small; failed=documents 500 not in [0, 4]; policy=policy.toml"
    )


def test_a_miss_names_the_nearest_rule_and_each_condition_it_failed(tmp_path: Path) -> None:
    policy = loaded(
        tmp_path,
        rule("far", model="llama-*", documents=[9, 9], document_tokens=[0, 10], formats=["litm"]),
        rule("probe", documents=[9, 9], formats=["litm"], stream=False),
    )
    header = policy.choose(features(documents=6, format="paragraphs", stream=True)).header
    assert header == (
        "none; reason=no-rule-matched; nearest=probe; failed=documents 6 not in [9, 9], format paragraphs not in "
        "[litm], stream true; policy=policy.toml"
    )
    assert "nearest=" not in loaded(tmp_path).choose(features()).header  # no rules: nothing to be near


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("version = 1\n[[rule]]\nid = 'x'\nstrategy = 'reorder'\n", "carries its evidence"),
        (policy_text(rule("x", documents=[9, 2])), "0 <= low <= high"),
        (policy_text(rule("x"), rule("x")), "rule ids repeat"),
        ("version = 2\n", "version"),
        ("not toml [", "policy"),
        (policy_text(rule("x") + "\nunknown = 1"), "unknown"),
    ],
)
def test_a_malformed_policy_is_refused_with_the_reason(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(PolicyError, match=fragment):
        load_policy(written(tmp_path, text), lambda text, param: Pipeline())


def test_the_built_in_policy_and_the_example_load() -> None:
    from contextlift.proxy.policy import example_policy

    built_in = load_policy(BUILT_IN, lambda text, param: Pipeline())
    # The paper's shape has no rule since the gate (reference.toml says why); LangChain's default join has one.
    assert built_in.choose(features(model="smollm2-135m-instruct", format="litm")).rule == "none"
    assert built_in.choose(features(model="smollm2-135m-instruct", format="paragraphs")).rule == "smollm2-paragraphs"
    assert built_in.choose(features(model="gpt-4o", format="litm")).rule == "none"
    assert "[[rule]]" in example_policy()


@pytest.mark.parametrize("model", ["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"])
@pytest.mark.parametrize(
    "reading", [("litm", "litm"), ("paragraphs", "paragraphs"), ("none", "none: ambiguous-chunks")]
)
def test_the_built_in_policy_applies_none_on_an_embedded_model_where_no_lift_held(
    model: str, reading: tuple[str, str]
) -> None:
    """docs/results/models: no pipeline's lift held on either Qwen model, so the built-in policy has none for them."""
    built_in = load_policy(BUILT_IN, lambda text, param: Pipeline())
    shape, read = reading
    assert built_in.choose(features(model=model, format=shape, reading=read)).rule == "none"


def test_auto_applies_the_rule_and_names_its_evidence(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    path = written(tmp_path, policy_text(rule("litm-promote", "reorder; order=promote", formats=["litm"])))
    client = make_client(policy_file=str(path))
    response = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "auto"})
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "reorder; order=promote"
    assert response.headers["x-context-policy"] == (
        "rule=litm-promote; evidence=r#litm-qa/reorder; lift=+0.100 [+0.040, +0.190]; n=90"
    )
    assert 'contextlift_policy_rules_total{rule="litm-promote"} 1.0' in client.get("/metrics").text


def test_the_policy_header_names_the_test_p_value_and_correction(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    tested = EVIDENCE.replace(" }", ', test = "mcnemar-exact", p = 0.00061, correction = "holm/6" }')
    path = written(tmp_path, policy_text(f'id = "tested"\nstrategy = "reorder"\n{tested}'))
    client = make_client(policy_file=str(path))
    response = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "auto"})
    assert response.headers["x-context-policy"] == (
        "rule=tested; evidence=r#litm-qa/reorder; lift=+0.100 [+0.040, +0.190]; n=90; test=mcnemar-exact; "
        "p=0.00061; correction=holm/6"
    )


def test_no_matching_rule_sends_the_clients_bytes(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    path = written(tmp_path, policy_text(rule("other-model", model="gpt-*")))
    client = make_client(policy_file=str(path))
    raw = json.dumps(BODY).encode()
    response = client.post(
        "/v1/chat/completions", content=raw, headers={"X-Context-Strategy": "auto", "content-type": "application/json"}
    )
    assert response.headers["x-context-strategy"] == "none"
    assert response.headers["x-context-policy"].startswith("none; reason=no-rule-matched")
    assert response.headers["x-context-documents"] == "5"
    assert fake.requests[0].content == raw


def test_an_explicit_selection_wins_over_auto_as_a_default(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    path = written(tmp_path, policy_text(rule("all")))
    client = make_client(policy_file=str(path), default_strategies={"*": "auto"})
    assert client.post("/v1/chat/completions", json=BODY).headers["x-context-policy"].startswith("rule=all")
    explicit = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "none"})
    assert "x-context-policy" not in explicit.headers
    assert explicit.headers["x-context-strategy"] == "none"


def test_caps_bind_every_rule(make_client: Any, tmp_path: Path) -> None:
    path = written(tmp_path, policy_text(rule("wide", "medoid; k=9")))
    with pytest.raises(SettingsError, match="wide"):
        make_client(policy_file=str(path), strategy_caps={"medoid.k": 3})


def test_a_bad_reload_keeps_the_policy_in_force_and_a_good_one_replaces_it(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    path = written(tmp_path, policy_text(rule("first")))
    client = make_client(policy_file=str(path), policy_poll_seconds=0.05)
    state = client.app.state["proxy"]
    path.write_text("version = 1\n[[rule]]\nid = 'broken'\n")
    assert state.reload_policy() is False
    assert [r.id for r, _ in state.policy.rules] == ["first"]
    path.write_text(policy_text(rule("second", "none")))
    deadline = time.monotonic() + 10
    while [r.id for r, _ in state.policy.rules] != ["second"]:
        assert time.monotonic() < deadline, "the changed file was not picked up"
        time.sleep(0.05)
    response = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "auto"})
    assert response.headers["x-context-policy"] == "rule=second"
    refused = [line for line in client.get("/metrics").text.splitlines() if 'reloads_total{outcome="refused"}' in line]
    # Refused once by the call above, and once more if the watcher saw the broken file before it was replaced.
    assert float(refused[0].rsplit(" ", 1)[1]) >= 1


def test_a_policy_file_not_written_yet_starts_on_the_built_in_one_and_is_picked_up_once_written(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    path = tmp_path / "policy.toml"
    client = make_client(policy_file=str(path), policy_poll_seconds=0.05)
    before = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "auto"})
    assert before.status_code == 200
    assert before.headers["x-context-policy"].endswith("policy=built-in")
    path.write_text(policy_text(rule("written-later", formats=["litm"])))
    deadline = time.monotonic() + 10
    state = client.app.state["proxy"]
    while [r.id for r, _ in state.policy.rules] != ["written-later"]:
        assert time.monotonic() < deadline, "the file written after start-up was not picked up"
        time.sleep(0.05)
    after = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "auto"})
    assert after.headers["x-context-policy"].startswith("rule=written-later")


def test_a_policy_path_that_is_not_a_file_still_stops_the_start(make_client: Any, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="Is a directory"):
        make_client(policy_file=str(tmp_path))


def test_the_built_in_policy_quotes_a_passage_where_nothing_may_move(make_client: Any, fake: FakeUpstream) -> None:
    from tests.strategies.framework_prompts import framework_prompts

    built_in = load_policy(BUILT_IN, lambda text, param: Pipeline())
    unmovable = features(model="smollm2-135m-instruct", format="none", reading="none: ambiguous-chunks", documents=0)
    assert built_in.choose(unmovable).rule == "smollm2-unmovable"
    for other in ("none: unproven-template", "none: no-documents"):
        assert built_in.choose(replace(unmovable, reading=other)).rule == "none"
    # LangChain's own "stuff" prompt, chunks joined by its default blank line, through the proxy with `auto`.
    prompt = next(p for p in framework_prompts() if p.name == "langchain-stuff-system")
    body = {**prompt.body, "model": "smollm2-135m-instruct"}
    response = make_client().post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": "auto"})
    assert response.status_code == 200
    assert response.headers["x-context-format"] == "none: ambiguous-chunks"
    assert response.headers["x-context-strategy"].startswith("excerpt; ranker=lexical; gate=0.12; ")
    assert response.headers["x-context-policy"].startswith(
        "rule=smollm2-unmovable; evidence=reference-unmovable-langchain#litm-qa/easy+hard/odd/excerpt"
    )
    sent = fake.bodies[-1]["messages"]
    assert all(m["content"] in s["content"] for m, s in zip(body["messages"], sent, strict=True))
    quoted = "; quoted" in response.headers["x-context-strategy"]
    assert sum(m["content"].count("Relevant excerpt") for m in sent) == int(quoted)
