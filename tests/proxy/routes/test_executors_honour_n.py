"""Executors honour the client's `n`: `medoid` returns n choices; `recite` and `fact`, which make one answer,
refuse `n` > 1 with a 400 naming the parameter instead of answering with fewer choices than asked."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, completion
from tests.proxy.routes.test_strategy_responses import BODY


@pytest.mark.parametrize("strategy", ["recite", "fact", "chain", "reorder, recite"])
def test_one_answer_executors_refuse_n_above_one(client: Any, fake: FakeUpstream, strategy: str) -> None:
    response = client.post("/v1/chat/completions", json={**BODY, "n": 2}, headers={"X-Context-Strategy": strategy})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "n"
    assert error["type"] == "invalid_request_error"
    assert "makes one answer" in error["message"]
    assert fake.requests == []


@pytest.mark.parametrize("n", [2.0, "2", 0])
def test_an_n_that_is_not_the_integer_one_is_refused_too(client: Any, fake: FakeUpstream, n: object) -> None:
    response = client.post("/v1/chat/completions", json={**BODY, "n": n}, headers={"X-Context-Strategy": "recite"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "n"
    assert fake.requests == []


def test_n_of_one_is_fine(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("NONE")), httpx.Response(200, json=completion("fact 1")))
    response = client.post("/v1/chat/completions", json={**BODY, "n": 1}, headers={"X-Context-Strategy": "recite"})
    assert response.status_code == 200


def test_without_documents_n_goes_upstream_untouched(client: Any, fake: FakeUpstream) -> None:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hello"}], "n": 2}
    response = client.post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": "recite"})
    assert response.status_code == 200
    assert fake.bodies[0]["n"] == 2


def test_medoid_returns_n_choices(client: Any, fake: FakeUpstream) -> None:
    response = client.post(
        "/v1/chat/completions", json={**BODY, "n": 2}, headers={"X-Context-Strategy": "medoid; k=3; seed=1"}
    )
    assert response.status_code == 200
    assert [c["index"] for c in response.json()["choices"]] == [0, 1]
