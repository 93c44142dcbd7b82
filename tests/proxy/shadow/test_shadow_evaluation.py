"""Shadow evaluation: the client's response is the same bytes with it on, with its queue full, and with the
shadow calls failing or hanging; a request whose answer depends on document order is counted position-sensitive
and an order-blind one is not; the sink holds hashes and scores unless capture is on, and never a key."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, chunk, completion, sse_body

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is about topic {i}" for i in range(1, 6))
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which fact comes first?\nAnswer:"}],
}
VARYING = ("x-contextlift-request-id", "x-request-id", "x-context-overhead-ms", "date")


def first_title(request: httpx.Request) -> httpx.Response:
    """A fake upstream that answers with the first document's title: its answer depends on document order."""
    titles = re.findall(r"Title: (T\d)", json.loads(request.content)["messages"][-1]["content"])
    return httpx.Response(200, json=completion(titles[0] if titles else "none"))


def blind(request: httpx.Request) -> httpx.Response:
    """A fake upstream whose answer ignores the order of the documents."""
    return httpx.Response(200, json=completion("T3"))


async def hangs(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


def answered(fake: FakeUpstream, *then: Any) -> FakeUpstream:
    """The served call answers normally; the shadow calls get `then` (repeated)."""
    fake.queue(httpx.Response(200, json=completion("The answer is T1.")), *then)
    return fake


def shadow_of(client: Any) -> Any:
    return client.app.state["proxy"].shadow


def settle(client: Any) -> None:
    client.blocking_portal.call(shadow_of(client).join)


def visible(response: httpx.Response) -> tuple[int, bytes, dict[str, str]]:
    headers = {k: v for k, v in response.headers.items() if k not in VARYING}
    return response.status_code, response.content, headers


def metric(client: Any, name: str, **labels: str) -> float:
    text = client.get("/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if not labels and line.startswith(f"{name} "):
            return float(line.rsplit(" ", 1)[1])
        if line.startswith(f"{name}{{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0 if wanted else float("nan")


@pytest.mark.parametrize("stream", [False, True])
def test_the_response_is_the_same_bytes_with_shadow_on(make_client: Any, fake: FakeUpstream, stream: bool) -> None:
    body = {**BODY, "stream": stream}
    if stream:
        events = [chunk("The answer"), chunk(" is T1."), chunk(finish="stop")]
        sse = lambda _: httpx.Response(200, content=sse_body(events), headers={"content-type": "text/event-stream"})  # noqa: E731
        fake.queue(sse, sse)
    off = make_client()
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"])
    baseline = off.post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": "none"})
    shadowed = on.post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": "none"})
    assert visible(shadowed) == visible(baseline)
    settle(on)
    assert shadow_of(on).records == 1
    assert metric(on, "contextlift_shadow_pending") == 0
    # The served call, then the candidate, the control (same order) and the two other orders: after the response.
    assert len(fake.requests) == 2 + 4
    assert all(not json.loads(r.content).get("stream") for r in fake.requests[2:])


@pytest.mark.parametrize("failure", ["refused", "hangs"])
def test_failing_or_hanging_shadow_calls_change_nothing_for_the_client(
    make_client: Any, fake: FakeUpstream, failure: str
) -> None:
    fake.queue(httpx.Response(200, json=completion("The answer is T1.")))
    baseline = make_client().post("/v1/chat/completions", json=BODY)
    then = [httpx.ConnectError("refused")] * 10 if failure == "refused" else [hangs] * 10
    answered(fake, *then)
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], upstream_timeout=60)
    response = on.post("/v1/chat/completions", json=BODY)
    assert visible(response) == visible(baseline)
    if failure == "refused":
        settle(on)
        assert metric(on, "contextlift_shadow_agreement_total", candidate="reorder", outcome="error") == 1
    # A hanging shadow call is cancelled when the app shuts down: leaving the client's block must not wait.


def test_a_full_queue_drops_and_counts(make_client: Any, fake: FakeUpstream) -> None:
    def served_streams_shadow_hangs(request: httpx.Request) -> Any:
        # The client's requests stream; a shadow call never does: it hangs, and holds the only shadow worker.
        if json.loads(request.content).get("stream"):
            events = [chunk("ok"), chunk(finish="stop")]
            return httpx.Response(200, content=sse_body(events), headers={"content-type": "text/event-stream"})
        return hangs(request)

    fake.queue(*[served_streams_shadow_hangs] * 10)
    on = make_client(
        shadow_rate=1.0, shadow_use_client_key=True, shadow_queue=1, shadow_max_in_flight=1, upstream_timeout=60
    )
    statuses = [on.post("/v1/chat/completions", json={**BODY, "stream": True}).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    assert metric(on, "contextlift_shadow_samples_total", outcome="dropped-queue") >= 1
    assert metric(on, "contextlift_shadow_pending") == 2  # one hanging in the worker, one waiting


def test_the_budget_drops_what_would_go_past_it(make_client: Any, fake: FakeUpstream) -> None:
    on = make_client(
        shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], shadow_calls_per_minute=2
    )
    assert on.post("/v1/chat/completions", json=BODY).status_code == 200
    settle(on)
    assert metric(on, "contextlift_shadow_samples_total", outcome="dropped-budget") == 1
    assert len(fake.requests) == 1


def test_an_order_dependent_answer_is_position_sensitive(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    fake.queue(*[first_title] * 5)
    sink = tmp_path / "shadow.jsonl"
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], shadow_sink=str(sink))
    assert on.post("/v1/chat/completions", json=BODY).json()["choices"][0]["message"]["content"] == "T1"
    settle(on)
    record = json.loads(sink.read_text())
    assert record["position_sensitive"] is True
    assert [row["strategy"] for row in record["position"]] == ["order=reversed", "order=permuted"]
    assert record["position"][0]["agrees"] is False
    assert metric(on, "contextlift_shadow_position_total", model="fake-model", outcome="sensitive") == 1


def test_an_order_blind_answer_is_not(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    fake.queue(*[blind] * 5)
    sink = tmp_path / "shadow.jsonl"
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], shadow_sink=str(sink))
    on.post("/v1/chat/completions", json=BODY)
    settle(on)
    record = json.loads(sink.read_text())
    assert record["position_sensitive"] is False
    assert record["candidates"][0]["exact"] is True
    assert metric(on, "contextlift_shadow_position_total", model="fake-model", outcome="stable") == 1


def test_the_sink_holds_no_content_unless_capture_is_on_and_never_a_key(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    key = "sk-client-7c1e55aa90"
    plain, captured = tmp_path / "plain.jsonl", tmp_path / "captured.jsonl"
    for sink, capture in ((plain, False), (captured, True)):
        on = make_client(
            shadow_rate=1.0,
            shadow_use_client_key=True,
            shadow_strategies=["reorder"],
            shadow_sink=str(sink),
            shadow_capture=capture,
        )
        on.post("/v1/chat/completions", json={**BODY, "user": "alice"}, headers={"Authorization": f"Bearer {key}"})
        settle(on)
    assert "fact number" not in plain.read_text()
    assert "The answer" not in plain.read_text()
    record = json.loads(captured.read_text())
    assert "fact number 3" in record["captured"]["body"]["messages"][0]["content"]
    assert "user" not in record["captured"]["body"]
    assert key not in plain.read_text() + captured.read_text()
    # The shadow calls carried the client's own key, as the served one did.
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in fake.requests)


def test_requests_without_documents_are_not_sampled(make_client: Any, fake: FakeUpstream) -> None:
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"])
    on.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    settle(on)
    assert shadow_of(on).records == 0
    assert len(fake.requests) == 1


def test_a_candidate_that_does_not_resolve_stops_start_up(make_client: Any) -> None:
    from contextlift.proxy import SettingsError

    with pytest.raises(SettingsError, match=r"shadow_strategies\[0\]"):
        make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["no-such-strategy"])


def test_a_write_that_comes_after_close_does_not_reopen_the_sink(tmp_path: Path) -> None:
    from contextlift.proxy.shadow.sink import ShadowSink

    sink = ShadowSink(tmp_path / "s.jsonl", 1 << 20)
    sink.write({"n": 1})
    sink.close()
    sink.write({"n": 2})  # a cancelled evaluation's write, finishing in its thread after shutdown
    assert (tmp_path / "s.jsonl").read_text() == '{"n":1}\n'


def test_an_answer_the_shadow_cannot_read_is_still_relayed_as_it_came(make_client: Any, fake: FakeUpstream) -> None:
    odd = {**completion(), "choices": 5}
    fake.queue(httpx.Response(200, json=odd), httpx.Response(200, json=odd))
    off = make_client().post("/v1/chat/completions", json=BODY)
    on_client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"])
    on = on_client.post("/v1/chat/completions", json=BODY)
    assert visible(on) == visible(off)
    assert on.json()["choices"] == 5
    settle(on_client)
    assert metric(on_client, "contextlift_shadow_samples_total", outcome="not-served") == 1


@pytest.mark.parametrize(
    ("body", "settings"),
    [
        ({**BODY, "n": 2}, {}),
        ({**BODY, "user": "x" * 2048}, {"shadow_max_body_bytes": 1024}),
    ],
    ids=["several-choices", "body-over-the-bound"],
)
def test_requests_the_shadow_cannot_compare_or_hold_are_not_evaluated_and_counted_not_kept(
    make_client: Any, fake: FakeUpstream, body: dict[str, Any], settings: dict[str, Any]
) -> None:
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], **settings)
    assert on.post("/v1/chat/completions", json=body).status_code == 200
    settle(on)
    assert shadow_of(on).records == 0
    assert len(fake.requests) == 1
    assert metric(on, "contextlift_shadow_samples_total", outcome="not-kept") == 1
    assert shadow_of(on).tally.pending == 0


def test_a_control_that_does_not_reproduce_the_served_answer_makes_sensitivity_unknown(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    answers = iter(["T1", "T9", "T7", "T1", "T1"])  # served, candidate, control (differs), reversed, permuted
    fake.queue(*[lambda _r: httpx.Response(200, json=completion(next(answers)))] * 5)
    sink = tmp_path / "shadow.jsonl"
    on = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], shadow_sink=str(sink))
    on.post("/v1/chat/completions", json=BODY)
    settle(on)
    record = json.loads(sink.read_text())
    assert record["control"]["agrees"] is False
    assert record["position_sensitive"] is None
    assert metric(on, "contextlift_shadow_position_total", model="fake-model", outcome="unknown") == 1


def test_no_credential_the_client_sent_reaches_the_sink(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> None:
    client_key, azure_key = "sk-client-5f0c2d9e77", "azure-key-0b7e4f11aa"

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=completion(f"T1 {client_key} {azure_key}"))

    fake.queue(*[echo] * 5)
    sink = tmp_path / "shadow.jsonl"
    on = make_client(
        shadow_rate=1.0, shadow_strategies=["reorder"], shadow_sink=str(sink), shadow_capture=True,
        upstream_api_key="sk-operator-1234567890",
    )  # fmt: skip
    pasted = {**BODY, "messages": [{"role": "system", "content": f"key {client_key}"}, *BODY["messages"]]}
    headers = {"Authorization": f"Bearer {client_key}", "api-key": azure_key}
    on.post("/v1/chat/completions", json=pasted, headers=headers)
    settle(on)
    text = sink.read_text()
    assert "[redacted]" in text
    assert client_key not in text
    assert azure_key not in text
    assert sink.stat().st_mode & 0o777 == 0o600


def test_the_token_budget_is_reserved_before_a_sample_runs(make_client: Any, fake: FakeUpstream) -> None:
    # The served call used 12 tokens: a sample of 1 candidate + control + 2 orders reserves 4 x 12 = 48.
    on = make_client(
        shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder"], shadow_tokens_per_minute=60
    )
    for _ in range(2):
        assert on.post("/v1/chat/completions", json=BODY).status_code == 200
        settle(on)
    assert shadow_of(on).records == 1
    assert metric(on, "contextlift_shadow_samples_total", outcome="dropped-budget") == 1


def test_a_candidate_that_is_the_served_pipeline_is_not_asked_again(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    """`reorder` served and `reorder` a candidate: the control already asks the served pipeline again, so the
    candidate is left out, the record says so, and no comparison of reorder with itself reaches the report."""
    sink = tmp_path / "shadow.jsonl"
    answered(fake, blind)
    fake.queue(*[blind] * 20)
    client = make_client(
        shadow_rate=1.0, shadow_use_client_key=True, shadow_strategies=["reorder", "focus"], shadow_sink=str(sink)
    )
    client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder"})
    settle(client)
    [record] = [json.loads(line) for line in sink.read_text().splitlines() if '"candidates"' in line]
    assert record["served"] == "reorder"
    assert [row["strategy"] for row in record["candidates"]] == ["focus"]
    assert record["served_as_candidate"] is True
    # The served call, then focus, the control and the two other orders.
    assert len(fake.requests) == 1 + 4
