"""With `shadow_otlp_logs` every shadow record and tally also reaches an OTLP/HTTP collector as a log record: its
body the record's JSON line as the file sink writes it, its attributes the GenAI conventions' model and operation and
the record's own fields, the service named; without `shadow_capture` no text a client sent is in it. Asked for with no
collector to export to, the proxy does not start."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse

from contextlift.proxy import Settings, create_app
from contextlift.proxy.settings import SettingsError
from tests.fakes import FakeEmbedder, FakeUpstream, completion
from tests.proxy.shadow.test_shadow_evaluation import BODY
from tests.serving import UPSTREAM, fake_upstream_url, request_body


class FakeCollector:
    """A scripted OTLP/HTTP collector: keeps every logs export it is sent, answers each with success."""

    def __init__(self) -> None:
        self.exports: list[ExportLogsServiceRequest] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        if (b"content-encoding", b"gzip") in scope["headers"]:
            body = gzip.decompress(body)
        if scope["path"] == "/v1/logs":
            self.exports.append(ExportLogsServiceRequest.FromString(body))
        answer = ExportLogsServiceResponse().SerializeToString()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/x-protobuf")]})  # fmt: skip
        await send({"type": "http.response.body", "body": answer})

    def records(self) -> list[tuple[dict[str, str], Any]]:
        """Every log record received, with its resource's attributes."""
        out = []
        for export in self.exports:
            for resource_logs in export.resource_logs:
                resource = {a.key: a.value.string_value for a in resource_logs.resource.attributes}
                out += [(resource, r) for scope_logs in resource_logs.scope_logs for r in scope_logs.log_records]
        return out


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCollector]:
    fake = FakeCollector()
    with fake_upstream_url(fake) as url:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", url.removesuffix("/v1") + "/v1/logs")
        yield fake


def attributes(record: Any) -> dict[str, Any]:
    values = {}
    for attribute in record.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind)
    return values


def test_every_record_and_tally_reaches_the_collector_as_a_log_record(
    fake: FakeUpstream, collector: FakeCollector
) -> None:
    fake.queue(*[httpx.Response(200, json=completion("T1"))] * 20)
    settings = Settings(upstream_url=UPSTREAM, shadow_rate=1.0, shadow_use_client_key=True,
                        shadow_strategies=["reorder"], shadow_otlp_logs=True)  # fmt: skip
    app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
    with TestClient(app) as client:
        for _ in range(3):
            assert client.post("/v1/chat/completions", json=BODY).status_code == 200
        client.blocking_portal.call(app.state["proxy"].shadow.join)
    # Leaving the client shut the proxy down, which exports what is queued.
    received = collector.records()
    samples = [(resource, r) for resource, r in received if r.event_name == "contextlift.shadow.sample"]
    tallies = [r for _, r in received if r.event_name == "contextlift.shadow.tally"]
    assert len(samples) == 3
    for resource, record in samples:
        assert resource["service.name"] == "contextlift"
        assert attributes(record) == {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "fake-model",
            "contextlift.shadow.served": "none",
            "contextlift.shadow.format": "litm",
            "contextlift.shadow.documents": 5,
            "contextlift.shadow.position_sensitive": False,
        }
        line = record.body.string_value
        assert json.loads(line)["candidates"][0]["strategy"] == "reorder"
        assert "captured" not in json.loads(line)
        assert "fact number" not in line  # the documents' text: only with shadow_capture
    assert json.loads(tallies[-1].body.string_value)["sampled"] == 3
    assert attributes(tallies[-1])["contextlift.shadow.sampled"] == 3


def test_asking_for_otlp_records_without_a_collector_stops_start_up(
    fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    settings = Settings(upstream_url=UPSTREAM, shadow_rate=1.0, shadow_otlp_logs=True)
    with pytest.raises(SettingsError, match="OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT"):
        create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
