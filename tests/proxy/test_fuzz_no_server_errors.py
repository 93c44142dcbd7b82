"""Fuzzing the chat endpoint: whatever a client sends (any JSON, any bytes, any strategy header, any
message shapes), the proxy never answers 5xx of its own making, and every refusal is an OpenAI envelope."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
roles = st.sampled_from(["user", "system", "assistant", "tool", "developer", "", "x"])
parts = st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "x"])}, optional={"text": json_values})
contents = st.one_of(st.text(max_size=200), st.lists(parts, max_size=4), json_values)
documentish = st.lists(
    st.sampled_from(["Document [1](Title: a) x", "<doc>y</doc>", "Document 2: z", '{"k": "v", "k2": "w"}', "\n\n"]),
    max_size=6,
).map("".join)
messages = st.lists(
    st.fixed_dictionaries({"role": roles}, optional={"content": st.one_of(contents, documentish)}), max_size=4
)
bodies = st.fixed_dictionaries(
    {"model": st.text(max_size=10)},
    optional={
        "messages": st.one_of(messages, json_values),
        "stream": st.one_of(st.booleans(), json_values),
        "stream_options": json_values,
        "context_strategy": st.one_of(
            st.sampled_from(["none", "reorder", "medoid; k=2", "fact; rounds=1", "recite", "query-aware, recite"]),
            json_values,
        ),
        "documents": json_values,
        "max_tokens": json_values,
    },
)
header_values = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


def check(response: Any) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


@FUZZ
@given(body=bodies, header=st.one_of(st.none(), header_values))
def test_any_json_body_and_strategy_header(body: dict[str, Any], header: str | None) -> None:
    app = create_app(Settings(upstream_url=UPSTREAM), transport=FakeUpstream().transport(), embedder=FakeEmbedder())
    headers = {"X-Context-Strategy": header} if header is not None else {}
    with TestClient(app) as client:
        check(client.post("/v1/chat/completions", content=json.dumps(body).encode(), headers={
            "content-type": "application/json", **headers}))  # fmt: skip


@FUZZ
@given(raw=st.binary(max_size=300), content_type=st.sampled_from(["application/json", "text/plain", "", "x/y+json"]))
def test_any_bytes(raw: bytes, content_type: str) -> None:
    app = create_app(Settings(upstream_url=UPSTREAM), transport=FakeUpstream().transport(), embedder=FakeEmbedder())
    with TestClient(app) as client:
        check(client.post("/v1/chat/completions", content=raw, headers={"content-type": content_type}))
