"""A request through the proxy shows up in `/metrics` with bounded labels."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes import FakeUpstream, chunk, sse_body, sse_response
from tests.serving import chat

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is true" for i in range(1, 4))
WITH_DOCS: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which fact?\nAnswer:"}],
}


def samples(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_requests_calls_tokens_and_steps_are_counted(client: Any, fake: FakeUpstream) -> None:
    client.post(
        "/v1/chat/completions", json=WITH_DOCS, headers={"X-Context-Strategy": "reorder; order=descending, medoid; k=2"}
    )
    fake.queue(httpx.Response(503), httpx.Response(400, json={"error": {"message": "bad"}}))
    client.post("/v1/chat/completions", json=chat())
    found = samples(client)
    route = ("route", "/v1/chat/completions")
    ok = (("model", "fake-model"), route, ("status_class", "2xx"), ("strategy", "reorder,medoid"))
    assert found[("contextlift_requests_total", ok)] == 1
    bad = (("model", "fake-model"), route, ("status_class", "4xx"), ("strategy", "none"))
    assert found[("contextlift_requests_total", bad)] == 1
    assert found[("contextlift_upstream_calls_total", (("outcome", "ok"),))] == 2
    assert found[("contextlift_upstream_calls_total", (("outcome", "status_503"),))] == 1
    assert found[("contextlift_upstream_calls_total", (("outcome", "status_400"),))] == 1
    assert found[("contextlift_tokens_total", (("direction", "in"), ("model", "fake-model")))] == 20
    assert found[("contextlift_strategy_step_duration_seconds_count", (("strategy", "medoid"),))] == 1
    assert found[("contextlift_strategy_step_duration_seconds_count", (("strategy", "reorder"),))] == 1
    assert found[("contextlift_requests_in_flight", ())] == 0
    duration = (("route", "/v1/chat/completions"), ("strategy", "reorder,medoid"))
    assert found[("contextlift_request_duration_seconds_count", duration)] == 1


def test_time_to_first_token_is_observed_for_streams(client: Any, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body([chunk("a"), chunk(finish="stop")])))
    client.post("/v1/chat/completions", json=chat(stream=True))
    assert samples(client)[("contextlift_time_to_first_token_seconds_count", (("strategy", "none"),))] == 1


def test_model_labels_are_bounded(client: Any) -> None:
    for i in range(30):
        client.post("/v1/chat/completions", json={**chat(), "model": f"invented-{i}"})
    models = {dict(labels).get("model") for name, labels in samples(client) if name == "contextlift_requests_total"}
    assert len(models) <= 21
    assert "other" in models


def test_raw_paths_never_become_labels(client: Any, fake: FakeUpstream) -> None:
    client.get("/v1/files/secret-file-id-123")
    text = client.get("/metrics").text
    assert "secret-file-id-123" not in text
    assert 'route="/v1/{path:path}"' in text


def test_detection_outcomes_are_counted_by_shape_or_reason(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(document_formats=[{"name": "kb", "start": "<kb>", "separator": "%%"}])
    reorder = {"X-Context-Strategy": "reorder"}
    client.post("/v1/chat/completions", json=WITH_DOCS, headers=reorder)
    separated = "Context:\nParis is in France.\n---\nBerlin is in Germany.\n\nQuestion: Where is Berlin?"
    client.post("/v1/chat/completions", json=chat(separated), headers=reorder)
    paragraphs = "Context:\nParis is in France.\n\nBerlin is in Germany.\n\nQuestion: Where is Berlin?"
    client.post("/v1/chat/completions", json=chat(paragraphs), headers=reorder)
    client.post("/v1/chat/completions", json=chat("<kb>a%%b\nWhich?"), headers=reorder)
    client.post("/v1/chat/completions", json=chat("Tell me a joke."), headers=reorder)
    client.post("/v1/chat/completions", json=chat())
    client.get("/v1/models")
    found = {
        dict(labels)["format"]: value
        for (name, labels), value in samples(client).items()
        if name == "contextlift_detections_total"
    }
    assert found == {
        "litm": 1,
        "separated": 1,
        "none: ambiguous-chunks": 1,
        "declared": 1,
        "none: no-context-region": 1,
        "none: not-requested": 1,
    }
