"""The question where the template puts it: on every app shape whose units are read, a step that adds text (`excerpt`,
its gate open) writes one block, every byte the app sent kept in order, and the block stands outside every unit the
app wrote (before the question, or where the template's answer slot opens), never inside a chunk."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from tests.fakes import FakeEmbedder
from tests.strategies.app_prompts import AppShape, app_shapes
from tests.strategies.app_prompts.outcome import slot_texts
from tests.strategies.scripted import ScriptedUpstream

READ = [shape for shape in app_shapes() if parse_request(copy.deepcopy(shape.body)).documents]


async def _sent(shape: AppShape) -> dict[str, Any]:
    pipeline = build_registry().resolve(parse_selection("excerpt; ranker=lexical; gate=0"), {})
    upstream = ScriptedUpstream("ok")
    request = parse_request(copy.deepcopy(shape.body))
    await run_pipeline(pipeline, request, upstream, Services(embedder=FakeEmbedder()))
    return (upstream.bodies or upstream.streamed)[0]


def test_most_shapes_are_read() -> None:
    assert len(READ) >= 30


@pytest.mark.parametrize("shape", READ, ids=[shape.name for shape in READ])
async def test_the_block_is_added_outside_every_unit(shape: AppShape) -> None:
    before, after = slot_texts(shape.body), slot_texts(await _sent(shape))
    assert before.keys() == after.keys()
    grown = [slot for slot in before if before[slot] != after[slot]]
    assert len(grown) == 1, "one text holds the block"
    old, new = before[grown[0]], after[grown[0]]
    at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), len(old))
    assert new.endswith(old[at:]), "every byte the app sent, in order"
    for unit in (u.strip() for u in shape.units):
        start = old.find(unit)
        assert start < 0 or not start < at < start + len(unit), f"the block is inside the unit {unit[:50]!r}"
