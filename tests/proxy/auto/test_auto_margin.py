"""`auto` reads the ranker's confidence: a rule's `ranker_margin` range matches on how far the top document
stands out in its ranker's ranking (scale-free: the top's lead over the second as a share of its lead over the
last), so a policy can send requests where one document stands out to `reorder` and the rest elsewhere. The
margin is computed only when a rule asks for it, named in `X-Context-Policy`, and an unknown ranker is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy import SettingsError
from contextlift.proxy.policy import Rule, ranker_margin
from tests.fakes import FakeUpstream

EVIDENCE = 'evidence = { id = "r#litm-qa/x", lift = 0.1, ci95 = [0.04, 0.19], n = 90, report = "r", date = "d" }'
POLICY = f"""version = 1

[[rule]]
id = "stands-out"
ranker_margin = [0.5, 1.0]
margin_ranker = "lexical"
strategy = "reorder; ranker=lexical"
{EVIDENCE}

[[rule]]
id = "close-call"
ranker_margin = [0.0, 0.5]
margin_ranker = "lexical"
strategy = "recite"
{EVIDENCE}
"""


def body(documents: list[str], question: str) -> dict[str, Any]:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {d}" for i, d in enumerate(documents, 1))
    return {"model": "m", "messages": [{"role": "user", "content": f"{lines}\n\nQuestion: {question}\nAnswer:"}]}


STANDS_OUT = body(
    ["rivers flow to the sea", "Osk is where Ravel Oduya was born", "the moon orbits", "bread rises"],
    "where was Ravel Oduya born",
)
CLOSE = body(
    ["Ravel Oduya sailed from Venn", "Ravel Oduya sang in Venn", "the moon orbits", "bread rises"],
    "where did Ravel Oduya sail or sing",
)


@pytest.mark.parametrize(
    ("scores", "margin"), [([3.0, 2.0, 1.0], 0.5), ([1.0, 1.0, 0.0], 0.0), ([2.0, 0.0, 0.0], 1.0), ([5.0], None)]
)
def test_the_margin_is_the_tops_lead_as_a_share_of_the_spread(scores: list[float], margin: float | None) -> None:
    assert ranker_margin(scores) == margin
    assert ranker_margin([s * 40 - 7 for s in scores]) == margin  # the same on any scale


def test_a_rule_routes_by_the_rankers_margin(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY)
    client = make_client(policy_file=str(tmp_path / "policy.toml"))
    out = client.post("/v1/chat/completions", json=STANDS_OUT, headers={"X-Context-Strategy": "auto"})
    close = client.post("/v1/chat/completions", json=CLOSE, headers={"X-Context-Strategy": "auto"})
    assert out.headers["x-context-policy"].startswith("rule=stands-out; margin=")
    assert float(out.headers["x-context-policy"].split("margin=")[1].split(";")[0]) >= 0.5
    assert out.headers["x-context-strategy"] == "reorder; ranker=lexical"
    assert close.headers["x-context-policy"].startswith("rule=close-call; margin=")
    assert close.headers["x-context-strategy"].startswith("recite")


def test_a_policy_without_margins_ranks_nothing(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(f'version = 1\n[[rule]]\nid = "all"\nstrategy = "recite"\n{EVIDENCE}\n')
    client = make_client(policy_file=str(tmp_path / "policy.toml"))
    client.post("/v1/chat/completions", json=STANDS_OUT, headers={"X-Context-Strategy": "auto"})
    assert "contextlift_rankings_total{" not in client.get("/metrics").text


def test_an_unknown_margin_ranker_refuses_the_policy(make_client: Any, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(POLICY.replace('margin_ranker = "lexical"', 'margin_ranker = "cohere"'))
    with pytest.raises(SettingsError, match="unknown ranker 'cohere'"):
        make_client(policy_file=str(tmp_path / "policy.toml"))


@pytest.mark.parametrize(
    "fields", [{"ranker_margin": (0.6, 0.2)}, {"ranker_margin": (0.0, 1.5)}, {"margin_ranker": "lexical"}]
)
def test_a_margin_condition_is_validated(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="margin"):
        Rule(id="r", strategy="none", **fields)


def test_a_request_no_margin_rule_can_reach_is_not_ranked(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    # The margin rules are for another model: this request meets none of them, so nothing is ranked for it.
    (tmp_path / "policy.toml").write_text(
        POLICY.replace('id = "stands-out"', 'id = "stands-out"\nmodel = "gpt-*"').replace(
            'id = "close-call"', 'id = "close-call"\nmodel = "gpt-*"'
        )
    )
    client = make_client(policy_file=str(tmp_path / "policy.toml"))
    response = client.post("/v1/chat/completions", json=STANDS_OUT, headers={"X-Context-Strategy": "auto"})
    assert response.headers["x-context-policy"].startswith("none; reason=no-rule-matched")
    assert "contextlift_rankings_total{" not in client.get("/metrics").text
