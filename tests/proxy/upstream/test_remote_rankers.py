"""Rankers the operator runs as services (`CONTEXTLIFT_RANKERS`), through the proxy: a rerank API in Cohere's
and TEI's shapes and an embeddings endpoint, each a scripted fake on a loopback socket. A ranker that is down,
slow, or answers nonsense never fails the request: the documents keep the client's order, `X-Context-Strategy`
says which ranker fell back and why, the metrics count it, and the circuit opens after repeated failures. A
ranker gets its own key and never the client's; an unknown ranker is a 400 before any upstream call; a
misconfigured one stops start-up."""

from __future__ import annotations

import asyncio
import json
import re
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from contextlift.proxy.app import create_app
from contextlift.proxy.settings import Settings, SettingsError
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM, fake_upstream_url, request_body

QUESTION = "where was Ravel Oduya born"
DOCS = [
    "Ravel Oduya founded the Kestrel Guild in Venn.",
    "The Kestrel Guild's first ship was the Longwater.",
    "Ravel Oduya was born in the village of Osk.",
    "Venn is a harbour town.",
]
BEST_FIRST = [DOCS[2], DOCS[0], DOCS[1], DOCS[3]]
"""The order of the default `promote` with DOCS[2] best: it moves first, the rest keep the client's order."""
BODY = {
    "model": "m",
    "messages": [
        {
            "role": "user",
            "content": "Answer.\n\n"
            + "\n".join(f"Document [{i}](Title: T{i}) {d}" for i, d in enumerate(DOCS, 1))
            + f"\n\nQuestion: {QUESTION}?\nAnswer:",
        }
    ],
}


def overlap(text: str) -> float:
    """The fake service's relevance: shared words with the question (DOCS[2] shares the most)."""
    return float(len(set(re.findall(r"\w+", text.lower())) & set(QUESTION.split())))


def vector(text: str) -> list[float]:
    rows = [0.0] * 32
    for word in re.findall(r"\w+", text.lower()):
        rows[zlib.crc32(word.encode()) % 32] += 1.0
    return rows


def one_hot(word: str) -> list[float]:
    rows = [0.0] * 32
    rows[zlib.crc32(word.encode()) % 32] = 1.0
    return rows


class FakeRankService:
    """A scripted fake of rerank and embeddings services: the path picks the behaviour; every request is kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = json.loads(await request_body(receive) or b"{}")
        path = scope["path"]
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.requests.append((path, headers, body))
        status, answer, extra = 200, b"", []
        if path == "/cohere":
            results = [{"index": i, "relevance_score": overlap(t)} for i, t in enumerate(body["documents"])]
            answer = json.dumps({"results": results[::-1]}).encode()
        elif path == "/tei":
            answer = json.dumps([{"index": i, "score": overlap(t)} for i, t in enumerate(body["texts"])]).encode()
        elif path == "/embeddings":
            data = [{"index": i, "embedding": vector(t)} for i, t in enumerate(body["input"])]
            answer = json.dumps({"data": data[::-1]}).encode()
        elif path == "/tokens":  # llama.cpp's server for a model without pooling: one vector per token
            data = [{"index": i, "embedding": [one_hot(w) for w in re.findall(r"\w+", t.lower())]} for i, t in
                    enumerate(body["input"])]  # fmt: skip
            answer = json.dumps({"data": data}).encode()
        elif path == "/slow":
            await asyncio.sleep(3)
        elif path == "/count":
            answer = b'{"results": [{"index": 0, "relevance_score": 1.0}]}'
        elif path == "/nan":
            answer = b'[{"index": 0, "score": NaN}, {"index": 1, "score": 1}, {"index": 2, "score": 1},' + (
                b' {"index": 3, "score": 1}]'
            )
        elif path == "/range":
            answer = json.dumps([{"index": i + 1, "score": 1.0} for i in range(len(body["texts"]))]).encode()
        elif path.startswith("/status/"):
            status, answer = int(path.rsplit("/", 1)[1]), b'{"error": "no"}'
        elif path == "/huge":
            answer = b'{"results": [' + b" " * (5 * 1024 * 1024) + b"]}"
        elif path == "/redirect":
            status, extra = 307, [(b"location", b"http://127.0.0.1:9/elsewhere")]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[FakeRankService, str]]:
    fake = FakeRankService()
    with fake_upstream_url(fake) as url:
        yield fake, url.removesuffix("/v1")


def proxy(fake: FakeUpstream, rankers: dict[str, Any], **settings: Any) -> Any:
    from litestar.testing import TestClient

    app = create_app(
        Settings(upstream_url=UPSTREAM, retry_backoff=0.0, rankers=rankers, **settings),
        transport=fake.transport(),
        embedder=FakeEmbedder(),
    )
    return TestClient(app, raise_server_exceptions=False)


def documents_sent(fake: FakeUpstream) -> list[str]:
    prompt = fake.bodies[-1]["messages"][0]["content"]
    return [line.split(") ", 1)[1] for line in prompt.splitlines() if line.startswith("Document")]


@pytest.mark.parametrize(
    ("kind", "path", "extra"),
    [
        ("rerank", "/cohere", {"model": "rerank-v3.5"}),
        ("rerank", "/tei", {"api": "tei"}),
        ("embeddings", "/embeddings", {"model": "text-embedding-3-small"}),
        ("embeddings", "/tokens", {"model": "smollm2"}),
    ],
)
def test_a_service_ranker_ranks_through_the_proxy(
    service: tuple[FakeRankService, str], kind: str, path: str, extra: dict[str, Any]
) -> None:
    fake_service, url = service
    fake = FakeUpstream()
    rankers = {"svc": {"kind": kind, "url": url + path, "api_key": "ranker-key", **extra}}
    with proxy(fake, rankers) as client:
        response = client.post(
            "/v1/chat/completions",
            json=BODY,
            headers={"X-Context-Strategy": "reorder; ranker=svc", "Authorization": "Bearer client-key"},
        )
        metrics = client.get("/metrics").text
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "reorder; ranker=svc; gate=unmeasured"
    assert documents_sent(fake) == BEST_FIRST
    sent_path, headers, body = fake_service.requests[-1]
    assert sent_path == path
    # Its own key only; nothing of the client's credentials or request but the question and the documents.
    assert headers["authorization"] == "Bearer ranker-key"
    assert "client-key" not in json.dumps([headers, body])
    assert body.get("model") == extra.get("model")
    assert 'contextlift_rankings_total{outcome="ok",ranker="svc"} 1.0' in metrics


def test_embeddings_are_cached_by_model_and_text(service: tuple[FakeRankService, str]) -> None:
    fake_service, url = service
    rankers = {"emb": {"kind": "embeddings", "url": url + "/embeddings", "model": "e"}}
    with proxy(FakeUpstream(), rankers) as client:
        before = len(fake_service.requests)
        for _ in range(2):
            client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=emb"})
    assert len(fake_service.requests) - before == 1
    assert "authorization" not in fake_service.requests[-1][1]  # no key configured: none sent


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/slow", "timeout"),
        ("/count", "bad-answer"),
        ("/nan", "bad-answer"),
        ("/range", "bad-answer"),
        ("/status/503", "http-5xx"),
        ("/status/401", "http-4xx"),
        ("/huge", "oversized"),
        ("/redirect", "http-3xx"),
        (None, "unreachable"),
    ],
)
def test_a_failing_ranker_keeps_the_clients_order(
    service: tuple[FakeRankService, str], path: str | None, reason: str
) -> None:
    url = service[1] + path if path else "http://127.0.0.1:9/rerank"  # port 9 (discard): nothing listens
    fake = FakeUpstream()
    with proxy(fake, {"svc": {"kind": "rerank", "api": "tei", "url": url, "timeout": 0.5}}) as client:
        response = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=svc"})
        metrics = client.get("/metrics").text
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == f"reorder; ranker=svc; ranker-fallback=svc:{reason}"
    assert documents_sent(fake) == DOCS
    assert f'contextlift_rankings_total{{outcome="{reason}",ranker="svc"}} 1.0' in metrics


def test_the_circuit_opens_after_repeated_failures(service: tuple[FakeRankService, str]) -> None:
    fake_service, url = service
    rankers = {"svc": {"kind": "rerank", "url": url + "/status/502", "failure_threshold": 2}}
    with proxy(FakeUpstream(), rankers) as client:
        before = len(fake_service.requests)
        applied = [
            client.post(
                "/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=svc"}
            ).headers["x-context-strategy"]
            for _ in range(3)
        ]
    assert [a.rsplit(":", 1)[1] for a in applied] == ["http-5xx", "http-5xx", "circuit-open"]
    assert len(fake_service.requests) - before == 2


def test_fusion_of_a_service_and_lexical_survives_the_service_failing(service: tuple[FakeRankService, str]) -> None:
    url = service[1]
    rankers = {
        "down": {"kind": "rerank", "url": url + "/status/500"},
        "both": {"kind": "fusion", "members": ["lexical", "down"]},
    }
    fake = FakeUpstream()
    with proxy(fake, rankers) as client:
        response = client.post(
            "/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=both"}
        )
    assert response.headers["x-context-strategy"] == "reorder; ranker=both; gate=unmeasured"
    assert documents_sent(fake)[0] == DOCS[2]  # BM25 alone still finds it


def test_an_unknown_ranker_is_a_400_before_any_upstream_call() -> None:
    fake = FakeUpstream()
    with proxy(fake, {}) as client:
        response = client.post(
            "/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=cohere"}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("X-Context-Strategy", "invalid_strategy")
    assert "unknown ranker 'cohere'" in error["message"]
    assert fake.requests == []


def test_the_default_ranker_is_the_operators() -> None:
    fake = FakeUpstream()
    docs = dict(BODY)
    with proxy(fake, {}, default_ranker="client") as client:
        response = client.post("/v1/chat/completions", json=docs, headers={"X-Context-Strategy": "reorder"})
    assert response.headers["x-context-strategy"] == "reorder"
    assert documents_sent(fake) == DOCS  # the client's first document is its best: promote moves nothing


@pytest.mark.parametrize(
    ("rankers", "default", "message"),
    [
        ({"lexical": {"kind": "rerank", "url": "http://x/rerank"}}, "minilm", "is a built-in ranker's"),
        ({"both": {"kind": "fusion", "members": ["lexical", "nope"]}}, "minilm", "member 'nope' is not"),
        ({}, "cohere", "default_ranker 'cohere' is not a ranker"),
        ({"Bad Name": {"kind": "rerank", "url": "http://x/rerank"}}, "minilm", "lowercase letters"),
    ],
)
def test_a_misconfigured_ranker_stops_start_up(rankers: dict[str, Any], default: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        create_app(Settings(upstream_url=UPSTREAM, rankers=rankers, default_ranker=default), embedder=FakeEmbedder())


@pytest.mark.parametrize(
    "setting",
    [
        {"kind": "rerank"},  # no url
        {"kind": "embeddings", "url": "ftp://x"},
        {"kind": "fusion", "members": ["lexical"]},
        {"kind": "rerank", "url": "http://x", "timeout": 0},
        {"kind": "rerank", "url": "http://x", "shape": "cohere"},  # unknown field
    ],
)
def test_a_ranker_setting_is_validated(setting: dict[str, Any]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Settings(upstream_url=UPSTREAM, rankers={"svc": setting})


def test_rankers_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "CONTEXTLIFT_RANKERS",
        '{"tei": {"kind": "rerank", "api": "tei", "url": "http://tei:8080/rerank", "api_key": "sk-ranker"}}',
    )
    settings = Settings(upstream_url=UPSTREAM)
    assert settings.rankers["tei"].api == "tei"
    assert "sk-ranker" not in repr(settings)  # the key is a secret: never in a log line or an error
