"""The popular RAG apps' request bodies (`tests/strategies/app_prompts/`) through the proxy with `reorder`: where the
request proves its units, the body sent upstream holds each unit whole and every other message as the app sent it,
and `X-Context-Format` names the proof; elsewhere the body goes upstream as the app sent it and the header says why
nothing moved."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.fakes import FakeUpstream
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
        assert upstream == body
        reason = detection.removeprefix("none: ")
        # A reading that is a guess declines the move by name; where no documents were read, nothing ran.
        declined = f"{MOVE} -> none: {reason}" if reason in ("ambiguous-chunks", "unproven-boundaries") else "none"
        assert response.headers["x-context-strategy"] == declined
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
