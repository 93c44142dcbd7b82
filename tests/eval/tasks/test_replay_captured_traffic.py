"""`contextlift eval --replay` on requests a shadowed proxy really captured: each becomes an as-captured case
(agreement with the served answer), a permuted one (stability), and SWiM's positional test built from its own
documents, and the positional probe shadow evaluation runs; the scripted upstream answers with the first
document's title (a probe: the value the first document holds), so the numbers are known by hand."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextlift.proxy.cli import main
from tests.fakes import FakeUpstream, completion
from tests.serving import fake_upstream_url, request_body

TITLES = ["Amber", "Birch", "Cedar", "Dune", "Elm"]
DOCS = "\n".join(f"Document [{i}](Title: {t}) The {t} hall keeps {i * 7} lanterns." for i, t in enumerate(TITLES, 1))
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which hall is first?\nAnswer:"}],
    "max_tokens": 16,
}


def answer_for(prompt: str) -> str:
    """Task generation: a question whose answer is in the first context document; otherwise the first title."""
    if prompt.startswith("Ask a factoid question"):
        hall = re.search(r"The (\w+) hall", prompt)
        return json.dumps({"question": "Which hall keeps lanterns?", "answer": hall[1] if hall else "?"})
    if "access code of" in prompt or "storage unit" in prompt or "spare key in box" in prompt:
        first = re.search(r"Document \[1\][^\n]*", prompt)
        value = re.search(r"\d{7}", first[0]) if first else None
        return value[0] if value else "I cannot tell"
    titles = re.findall(r"Title: (\w+)", prompt)
    return titles[0] if titles else "none"


async def scripted(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A fake upstream: lists one model, answers every chat with `answer_for` its last message."""
    if scope["type"] != "http":
        return
    body = await request_body(receive)
    if scope["path"].endswith("/models"):
        payload: dict[str, Any] = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
    else:
        payload = completion(answer_for(json.loads(body)["messages"][-1]["content"]))
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with fake_upstream_url(scripted) as url:
        yield url


@pytest.fixture
def captured(make_client: Any, fake: FakeUpstream, tmp_path: Path) -> Path:
    fake.queue(
        *[lambda r: httpx.Response(200, json=completion(answer_for(json.loads(r.content)["messages"][-1]["content"])))]
        * 20
    )
    sink = tmp_path / "shadow.jsonl"
    client = make_client(shadow_rate=1.0, shadow_use_client_key=True, shadow_sink=str(sink), shadow_capture=True)
    for _ in range(2):
        assert client.post("/v1/chat/completions", json=BODY).status_code == 200
    client.blocking_portal.call(client.app.state["proxy"].shadow.join)
    return sink


def test_replay_scores_agreement_stability_and_position(upstream_url: str, captured: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay"
    argv = ["eval", "--upstream", upstream_url, "--replay", str(captured), "--strategies", "none", "--strategies",
            "reorder; order=descending", "--retries", "0", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    by = {(s["variant"], s["strategy"], s["sample"], s["position"]): s for s in samples}
    # As captured, `none` answers what was served: the first title.
    assert by[("as-captured", "none", 0, None)]["score"] == 1.0
    assert by[("as-captured", "none", 0, None)]["answer"] == "Amber"
    # Permuted, the first title is another: `none` is not stable on this order-dependent upstream.
    assert by[("permuted", "none", 0, None)]["answer"] != "Amber"
    # The generated question's answer (Amber, from the first document) is scored at each depth: right only where
    # the Amber document comes first.
    positional = {
        s["position"]: s["score"]
        for s in samples
        if s["variant"] == "positional" and s["strategy"] == "none" and s["sample"] == 0
    }
    assert positional == {0: 1.0, 2: 0.0, 4: 0.0}
    # The probe, in the request's own shape: its value is found only where the needle's document comes first.
    probe = {s["position"]: s["score"] for s in samples if s["variant"] == "probe" and s["strategy"] == "none"}
    assert probe == {0: 1.0, 2: 0.0, 4: 0.0}
    report = (out / "report.md").read_text()
    assert "## replay: stability and agreement" in report
    assert "| none | 0.000 |" in report
    assert json.loads((out / "run.json").read_text())["tasks"]["replay"]["size_unit"] == "documents"
    # Agreement with the served answer is not accuracy: no lift, and no verdict, is read from it.
    lifted = {row["variant"] for row in json.loads((out / "results.json").read_text())["lift"]}
    assert lifted == {"positional", "probe"}


def test_a_sink_without_captured_requests_is_a_clear_error(
    upstream_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain.jsonl").write_text(json.dumps({"candidates": [], "position": []}) + "\n")
    argv = ["eval", "--upstream", upstream_url, "--replay", str(tmp_path / "plain.jsonl"), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "CONTEXTLIFT_SHADOW_CAPTURE=true" in capsys.readouterr().err


def test_a_malformed_captured_record_is_skipped_and_counted(upstream_url: str, captured: Path, tmp_path: Path) -> None:
    record = json.loads(captured.read_text().split("\n")[0])
    record["captured"]["body"]["max_tokens"] = {"n": 1}
    with captured.open("ab") as file:
        file.write(json.dumps(record).encode() + b"\n")
        file.write(b'{"candidates":[],"captured":{"body":{"messages":"\xff"}}}\n')  # a torn byte
    out = tmp_path / "replay"
    argv = ["eval", "--upstream", upstream_url, "--replay", str(captured), "--strategies", "none", "--retries", "0",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    report = (out / "report.md").read_text()
    assert "2 malformed records skipped (1 lines that are not records, 1 captured requests" in report
