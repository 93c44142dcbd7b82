"""Shadow evaluation against what clients and disks do: a record is one line whatever text it carries, a sink
that cannot be written says so without the record's content, no credential header a client sent reaches the sink,
a queued sample costs its body's bytes (not its parsed objects), and without an operator key the client is not
billed for the operator's evaluation unless the operator says so."""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
import structlog.testing

from contextlift.eval.sinks import read_sink
from tests.fakes import FakeUpstream, chunk, completion, sse_body
from tests.proxy.shadow.test_shadow_evaluation import BODY, hangs, metric, settle, shadow_of

CLIENT_KEY = "sk-client-5f0c2d9e77aa"
MiB = 1024 * 1024


def test_without_an_operator_key_a_sample_is_skipped_and_counted_not_billed_to_the_client(
    make_client: Any, fake: FakeUpstream
) -> None:
    on = make_client(shadow_rate=1.0, shadow_strategies=["reorder"])
    for _ in range(3):
        assert on.post("/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {CLIENT_KEY}"}).is_success
    settle(on)
    assert len(fake.requests) == 3  # the served calls only: no shadow call spent the client's key
    assert metric(on, "contextlift_shadow_samples_total", outcome="skipped-no-key") == 3
    assert shadow_of(on).records == 0


@pytest.mark.parametrize("local", ["http://127.0.0.1:8000/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1"])
def test_a_local_upstream_spends_no_client_key_unasked_either(make_client: Any, fake: FakeUpstream, local: str) -> None:
    # A local gateway may bill a paid API per call: the client's key is spent on shadow calls only when asked.
    off = make_client(upstream_url=local, shadow_rate=1.0, shadow_strategies=["reorder"])
    off.post("/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {CLIENT_KEY}"})
    settle(off)
    assert shadow_of(off).records == 0
    assert metric(off, "contextlift_shadow_samples_total", outcome="skipped-no-key") == 1
    on = make_client(upstream_url=local, shadow_rate=1.0, shadow_strategies=["reorder"], shadow_use_client_key=True)
    on.post("/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {CLIENT_KEY}"})
    settle(on)
    assert shadow_of(on).records == 1


def test_with_an_operator_key_shadow_runs_on_it(make_client: Any, fake: FakeUpstream) -> None:
    on = make_client(shadow_rate=1.0, shadow_strategies=["reorder"], upstream_api_key="sk-operator-1234567890")
    on.post("/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {CLIENT_KEY}"})
    settle(on)
    assert shadow_of(on).records == 1
    assert all(r.headers["authorization"] == "Bearer sk-operator-1234567890" for r in fake.requests)


def test_no_credential_header_the_client_sent_reaches_the_sink(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    credentials = {
        "Ocp-Apim-Subscription-Key": "apim-3c9d0e1f2a3b",
        "x-goog-api-key": "AIzaSy-goog-77aa11bb",
        "x-portkey-api-key": "portkey-5e6f7a8b9c",
        "X-Gateway-Token": "gateway-tok-0d1e2f3a",
    }

    def echo(request: httpx.Request) -> httpx.Response:  # a fake upstream that repeats what it was sent
        return httpx.Response(200, json=completion("T1 " + " ".join(request.headers.get(k, "") for k in credentials)))

    fake.queue(*[echo] * 5)
    sink = tmp_path / "shadow.jsonl"
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"],
                     shadow_sink=str(sink), shadow_capture=True)  # fmt: skip
    on.post("/v1/chat/completions", json=BODY, headers=credentials)
    settle(on)
    assert all(r.headers.get("x-goog-api-key") for r in fake.requests)  # forwarded: the upstream could echo them
    text = sink.read_text()
    assert "[redacted]" in text
    assert [value for value in credentials.values() if value in text] == []


def test_a_record_is_one_line_whatever_line_separators_its_text_holds(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    sink = tmp_path / "shadow.jsonl"
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_sink=str(sink), shadow_capture=True)
    models = ["m\u2028a", "m\u2029b", "m\x85c", "plain", "m\u2028\u2029\x85d"]
    for model in models:
        question = {"role": "user", "content": BODY["messages"][0]["content"] + " \u2028 \u2029 \x85"}
        assert on.post("/v1/chat/completions", json={**BODY, "model": model, "messages": [question]}).is_success
    settle(on)
    raw = sink.read_bytes()
    assert raw.isascii()
    assert len(raw.decode().splitlines()) == 5  # any line reader sees five records
    read = read_sink(sink)
    # Shadow workers evaluate samples concurrently: records arrive in the order their work finished.
    assert sorted(r["model"] for r in read.records) == sorted(models)
    assert read.skipped == 0


def test_a_sink_that_cannot_be_written_is_said_without_the_record_and_not_counted_evaluated(
    make_client: Any, fake: FakeUpstream, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = "the-patients-name-is-Ada-Quist"
    body = {**BODY, "messages": [{"role": "system", "content": secret}, *BODY["messages"]]}
    # /dev/full: every write fails with ENOSPC, as on a full disk.
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_sink="/dev/full", shadow_capture=True)
    # The proxy's log lines are read as events: where structlog prints depends on the stream an earlier test
    # configured it with, so printed output alone made this test depend on the order the suite ran in.
    with structlog.testing.capture_logs() as logged:
        assert on.post("/v1/chat/completions", json=body).is_success
        settle(on)
    printed = capfd.readouterr()
    assert secret not in printed.out + printed.err + repr(logged)
    assert any(event["event"] == "shadow record not written" for event in logged)
    assert metric(on, "contextlift_shadow_samples_total", outcome="sink-failed") == 1
    assert metric(on, "contextlift_shadow_samples_total", outcome="evaluated") == 0
    assert shadow_of(on).records == 0


def test_a_write_after_a_failed_one_starts_a_line_of_its_own(tmp_path: Path) -> None:
    from contextlift.proxy.shadow.sink import ShadowSink

    path = tmp_path / "s.jsonl"
    sink = ShadowSink(path, 1 << 20)
    sink.write({"candidates": [], "n": 1})
    with path.open("a") as file:
        file.write('{"candidates":[],"n":2,"to')  # what a full disk left of a line
    sink._drop_stream()  # what a failed write does: the file is reopened on the next one
    sink._torn = True
    sink.write({"candidates": [], "n": 3})
    sink.close()
    read = read_sink(path)
    assert [r["n"] for r in read.records] == [1, 3]
    assert read.skipped == 1


def summarised(client: Any, route: str) -> float:
    """The requests to `route` whose summary ran (`contextlift_requests_total`, over every label)."""
    lines = client.get("/metrics").text.splitlines()
    wanted = f'route="{route}"'
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith("contextlift_requests_total{") and wanted in line
    )


def test_a_queued_sample_costs_its_bodys_bytes_not_its_parsed_objects(make_client: Any, fake: FakeUpstream) -> None:
    """A body of 900 KB of `[],[],...` is ~20 MiB parsed; four of them queued must cost about their bytes."""

    def served_streams_shadow_hangs(request: httpx.Request) -> Any:
        if json.loads(request.content).get("stream"):
            events = [chunk("T1"), chunk(finish="stop")]
            return httpx.Response(200, content=sse_body(events), headers={"content-type": "text/event-stream"})
        return hangs(request)

    fake.queue(*[served_streams_shadow_hangs] * 20)
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_queue=10, shadow_max_in_flight=1,
                     upstream_timeout=60)  # fmt: skip
    payload = "[" + ",".join(["[]"] * 300_000) + "]"
    content = json.dumps({**BODY, "stream": True, "x_payload": None}).replace("null", payload).encode()
    assert len(content) < MiB
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(4):
            response = on.post("/v1/chat/completions", content=content, headers={"content-type": "application/json"})
            assert response.status_code == 200
        assert metric(on, "contextlift_shadow_pending") == 4  # one held by the hanging worker, three queued
        # Each request's summary (its log line and metrics) runs after the client has its last byte, and holds the
        # request until it has run: wait for the four, so that only the queue is left to measure.
        deadline = time.monotonic() + 30
        while summarised(on, "/v1/chat/completions") < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        fake.requests.clear()  # the fake's own copies of the bodies are not the proxy's
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The worker holds one parsed (its sample is running); the three queued cost their bytes.
    assert grown < 30 * MiB, f"{grown / MiB:.0f} MiB for 4 samples of {len(content) / MiB:.2f} MiB"
