"""The popular RAG apps' request bodies (`tests/strategies/app_prompts/`) through the proxy with `reorder`: where the
request proves its units, the body sent upstream holds each unit whole and every other message as the app sent it,
and `X-Context-Format` names the proof; where the units are a guess, nothing moves and the operator's fallback (by
default `excerpt`) adds one quoted block, the header saying why; where no documents were read, the body goes
upstream as the app sent it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.fakes import FakeUpstream
from tests.proxy.routes.test_excerpt_adds_one_quoted_block import inserted
from tests.strategies.app_prompts import AppShape, app_shapes
from tests.strategies.app_prompts.outcome import parse_as_detect_does, slot_texts
from tests.strategies.detection.app_shapes.test_app_shapes_never_wrong import INTACT

MOVE = "reorder; ranker=lexical; order=descending"
SHAPES = app_shapes()


def sent(fake: FakeUpstream) -> dict[str, Any]:
    return json.loads(fake.requests[-1].content)  # type: ignore[no-any-return]


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_each_app_shape_is_moved_whole_or_sent_as_it_came(client: Any, fake: FakeUpstream, shape: AppShape) -> None:
    body = copy.deepcopy(shape.body)
    body["stream"] = False
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": MOVE})
    assert response.status_code == 200
    detection = parse_as_detect_does(shape.body).detection
    assert response.headers["x-context-format"] == detection
    upstream = sent(fake)
    if shape.name not in INTACT:
        reason = detection.removeprefix("none: ")
        if reason not in ("ambiguous-chunks", "unproven-boundaries"):
            # No documents were read: nothing ran.
            assert upstream == body
            assert response.headers["x-context-strategy"] == "none"
            return
        # A reading that is a guess declines the move by name; the default fallback quotes one passage where its
        # ranker is sure of it, and adds nothing elsewhere.
        strategy = response.headers["x-context-strategy"]
        assert strategy.startswith(f"{MOVE} -> excerpt: {reason}; ")
        if "skipped=margin" in strategy:
            assert upstream == body
        else:
            # What it quoted is a paragraph or a chunk of the guessed reading, never a document number.
            assert "; quoted_paragraph=" in strategy or "; quoted_chunk=" in strategy
            assert_only_a_block_added(body, upstream)
        return
    assert response.headers["x-context-strategy"] == MOVE
    before, after = slot_texts(body), slot_texts(upstream)
    assert before.keys() == after.keys()
    holding = {slot for slot, text in before.items() if any(unit.strip() in text for unit in shape.units)}
    assert len(holding) == 1, "every app here writes its units into one text"
    for slot, text in before.items():
        if slot not in holding:
            assert after[slot] == text
    (slot,) = holding
    assert all(unit.strip() in after[slot] for unit in shape.units)
    assert sorted(after[slot]) == sorted(before[slot]), "the same characters, in another order"


def assert_only_a_block_added(body: dict[str, Any], upstream: dict[str, Any]) -> None:
    """The body as the app sent it but for one message's text, which grew by one insertion: the quoted block."""
    assert {k: v for k, v in upstream.items() if k != "messages"} == {k: v for k, v in body.items() if k != "messages"}
    assert len(upstream["messages"]) == len(body["messages"])
    changed = [i for i, (a, b) in enumerate(zip(body["messages"], upstream["messages"], strict=True)) if a != b]
    assert len(changed) == 1
    before, after = body["messages"][changed[0]], upstream["messages"][changed[0]]
    assert {k: v for k, v in after.items() if k != "content"} == {k: v for k, v in before.items() if k != "content"}
    _, added = inserted(before["content"], after["content"])
    assert added.count("Relevant excerpt") == 1


UNPROVEN = [shape for shape in SHAPES if shape.name not in INTACT]


@pytest.mark.parametrize("shape", UNPROVEN, ids=[shape.name for shape in UNPROVEN])
def test_with_no_fallback_a_guessed_reading_goes_as_the_app_sent_it(
    make_client: Any, fake: FakeUpstream, shape: AppShape
) -> None:
    client = make_client(unproven_fallback="none")
    body = copy.deepcopy(shape.body)
    body["stream"] = False
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": MOVE})
    assert sent(fake) == body
    reason = parse_as_detect_does(shape.body).detection.removeprefix("none: ")
    declined = f"{MOVE} -> none: {reason}" if reason in ("ambiguous-chunks", "unproven-boundaries") else "none"
    assert response.headers["x-context-strategy"] == declined
