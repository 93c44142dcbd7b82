"""Through the proxy, with the measured gates (the test client's default opens them): a ranked step under its
ranker's gate sends the client's bytes upstream as they came and says why in `X-Context-Strategy`; the scores it
ranked by stay visible in `X-Context-Scores`; `ranker_gates` naming no ranker stops the start."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextlift.proxy.app import create_app
from contextlift.proxy.settings import Settings, SettingsError
from tests.fakes import FakeUpstream
from tests.strategies.test_one_gate_for_every_ranked_step import NEAR_MISS, QUESTION, body


@pytest.mark.parametrize("strategy", ["reorder", "filter; top=2", "focus", "excerpt", "reorder; ranker=lexical"])
def test_under_the_gate_the_bytes_go_as_they_came(make_client: Any, fake: FakeUpstream, strategy: str) -> None:
    client = make_client(ranker_gates={})
    raw = json.dumps(body(NEAR_MISS, QUESTION), separators=(",", ":")).encode()
    response = client.post(
        "/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "x-context-strategy": strategy, "x-context-debug": "scores"},
    )
    assert response.status_code == 200
    assert fake.requests[-1].content == raw
    assert response.headers["x-context-strategy"].startswith(f"{strategy}; skipped=margin; margin=0.")
    assert "ranker=lexical" in response.headers["x-context-scores"]


def test_an_operator_gate_for_no_ranker_stops_the_start() -> None:
    with pytest.raises(SettingsError, match="ranker_gates names no ranker of this proxy: nosuch"):
        create_app(Settings(upstream_url="http://upstream.test/v1", ranker_gates={"nosuch": 0.2}))
