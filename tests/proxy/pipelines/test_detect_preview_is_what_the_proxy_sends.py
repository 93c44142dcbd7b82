"""`contextlift detect --strategy` runs the code path of a request: for every built-in strategy and a few pipelines,
on a prompt with documents, a plain question and blank-line chunks, the preview's body, steps and order are those of
the proxy's own request to the upstream (an executor's calls aside: the preview shows the body they start from)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy.cli import main
from contextlift.strategies import build_registry
from tests.fakes import FakeUpstream
from tests.serving import chat

TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars."]
QUESTION = "Where do gamma rays come from?"


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: {QUESTION}\nAnswer:"


def blank_line_chunks() -> str:
    context = "\n\n".join(TEXTS)
    return f"Answer the question based only on the following context:\n{context}\n\nQuestion: {QUESTION}"


PROMPTS = {"documents": litm(), "plain": "Tell me a joke about rivers.", "chunks": blank_line_chunks()}


def selections() -> list[str]:
    registry = build_registry()
    steps = [f"{name}; ranker=lexical" if registry.get(name).ranks else name for name in registry.names()]
    return [*steps, "reorder; ranker=lexical, repeat", "filter; ranker=lexical; top=2, focus; ranker=lexical, repeat",
            "reorder; ranker=lexical, medoid; k=2"]  # fmt: skip


def preview(tmp_path: Path, body: dict[str, Any], selection: str, capsys: pytest.CaptureFixture[str]) -> Any:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    capsys.readouterr()
    assert main(["detect", str(path), "--json", "--strategy", selection]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("prompt", list(PROMPTS))
@pytest.mark.parametrize("selection", selections())
def test_the_preview_is_the_request_the_proxy_sends(
    client: Any, fake: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str], selection: str, prompt: str
) -> None:
    body = chat(PROMPTS[prompt])
    shown = preview(tmp_path, body, selection, capsys)
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": selection})
    assert response.status_code == 200, response.text
    ran = response.headers["x-context-strategy"].split(", ")
    if shown["executor"] is None:
        # The last call is the request the transforms made (`pick` asks the model which passages first).
        assert shown["body"] == json.loads(fake.requests[-1].content)
        assert shown["strategy"] == response.headers["x-context-strategy"]
    else:
        assert ran[-1].startswith(shown["executor"])
        assert shown["strategy"] == (", ".join(ran[:-1]) or "none")
    told = response.headers.get("x-context-order")
    order = shown["order"]
    if told == "permuted":
        assert order == "kept" or isinstance(order, list)
    else:
        assert told == (order if order is None or isinstance(order, str) else ",".join(map(str, order)))
    assert response.headers["x-context-format"] == shown["format"]


def test_the_preview_runs_the_operators_fallback_for_a_move_it_cannot_prove(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("CONTEXTLIFT_UNPROVEN_FALLBACK", "focus")
    body = chat(PROMPTS["chunks"])
    shown = preview(tmp_path, body, "reorder; ranker=lexical", capsys)
    client = make_client(unproven_fallback="focus")
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": "reorder; ranker=lexical"})
    assert shown["strategy"] == response.headers["x-context-strategy"]
    assert "-> focus" in shown["strategy"]
    assert shown["body"] == json.loads(fake.requests[0].content)
