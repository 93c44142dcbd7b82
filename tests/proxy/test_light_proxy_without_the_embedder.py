"""The proxy without the embedder (the `embeddings` extra not installed, or `embedder=off`): `lexical` ranks by
default; a step naming `minilm` or `fusion` is a 400 that names the extra, before any upstream call; a default that
names one stops the start-up; `medoid` compares its answers by their words and says so (`similarity=lexical`)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from contextlift.proxy import Settings, create_app
from contextlift.proxy.settings import SettingsError
from tests.fakes import FakeUpstream, completion
from tests.serving import UPSTREAM, chat

LITM = (
    "Answer from the documents.\n\nDocument [1](Title: A) Alpha grows in spring.\nDocument [2](Title: B) Beta is a "
    "river.\nDocument [3](Title: C) Gamma rays come from stars.\n\nQuestion: Where do gamma rays come from?\nAnswer:"
)

ANSWERS = ("Stars.", "From stars.", "From the stars.", "Rivers.", "Stars, far away.")


@pytest.fixture
def light(fake: FakeUpstream) -> Any:
    settings = Settings(upstream_url=UPSTREAM, retry_backoff=0.0, embedder="off")
    with TestClient(create_app(settings, transport=fake.transport()), raise_server_exceptions=False) as client:
        yield client


def post(client: Any, strategy: str, content: str = LITM) -> Any:
    return client.post("/v1/chat/completions", json=chat(content), headers={"x-context-strategy": strategy})


def test_reorder_ranks_with_lexical_by_default(light: Any, fake: FakeUpstream) -> None:
    response = post(light, "reorder; order=descending")
    assert response.status_code == 200
    assert response.headers["x-context-order"].split(",")[0] == "3"
    assert "ranker-fallback" not in response.headers["x-context-strategy"]


@pytest.mark.parametrize("ranker", ["minilm", "fusion"])
def test_a_step_naming_an_embedder_ranker_is_a_400_naming_what_it_needs(
    light: Any, fake: FakeUpstream, ranker: str
) -> None:
    response = post(light, f"reorder; ranker={ranker}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_strategy"
    assert f"ranker {ranker!r} uses all-MiniLM-L6-v2" in error["message"]
    assert "embedder = off" in error["message"]
    assert fake.requests == []


def test_without_the_extra_the_400_names_the_extra(fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextlift.proxy.app.embeddings_installed", lambda: False)
    settings = Settings(upstream_url=UPSTREAM, retry_backoff=0.0)
    with TestClient(create_app(settings, transport=fake.transport()), raise_server_exceptions=False) as client:
        message = post(client, "filter; ranker=minilm").json()["error"]["message"]
    assert "pip install 'contextlift[embeddings]'" in message


def test_a_default_ranker_that_needs_the_embedder_stops_the_start_up(fake: FakeUpstream) -> None:
    settings = Settings(upstream_url=UPSTREAM, embedder="off", default_ranker="minilm")
    with pytest.raises(SettingsError, match="default_ranker 'minilm' uses all-MiniLM-L6-v2"):
        create_app(settings, transport=fake.transport())


def test_medoid_compares_answers_by_their_words_and_says_so(light: Any, fake: FakeUpstream) -> None:
    fake.queue(*(httpx.Response(200, json=completion(a)) for a in ANSWERS))
    response = post(light, "medoid; k=5; seed=1")
    assert response.status_code == 200
    assert "similarity=lexical" in response.headers["x-context-strategy"]
    assert response.json()["choices"][0]["message"]["content"] in {"From stars.", "From the stars."}


def test_with_the_embedder_medoid_names_no_other_method(client: Any, fake: FakeUpstream) -> None:
    fake.queue(*(httpx.Response(200, json=completion(a)) for a in ANSWERS))
    response = post(client, "medoid; k=5; seed=1")
    assert "similarity=" not in response.headers["x-context-strategy"]
