"""No request body a popular RAG app really sends is ever read wrongly: built with each app's own template and join
(`tests/strategies/app_prompts/`), every shape comes back byte for byte when nothing moves, and when its documents are
reversed each one either moves whole, with everything around it in place, or the request is left exactly as it came.

Which shapes are read (`intact`) and which are declined is not pinned here: only that none is `wrong`.
"""

from __future__ import annotations

import copy

import pytest

from tests.strategies.app_prompts import AppShape, app_shapes, shape_outcome
from tests.strategies.app_prompts.outcome import parse_as_detect_does, slot_texts

KNOWN_WRONG: dict[str, str] = {}
"""Shapes detection reads wrongly: none. (Open WebUI's system and 0.5 shapes were, while code fences were read in
`<source>` elements: a chunk cut inside a code block seemed to fence the next chunk's tags.)"""
INTACT = frozenset({
    "open-webui-user", "open-webui-system", "open-webui-one-file", "open-webui-follow-up", "open-webui-0.5",
    "anythingllm", "anythingllm-follow-up", "onyx", "llamaindex-context-chat", "llamaindex-condense-plus-context",
    "ragflow", "ragflow-follow-up", "quivr", "khoj", "r2r", "kotaemon", "verba", "qanything",
    "flowise", "flowise-follow-up", "lightrag-naive", "lightrag-mix-follow-up", "langchain-qa-with-sources",
    "langchain-retrieval-qa-with-sources", "perplexica", "perplexica-web-follow-up", "docsgpt",
    "docsgpt-agent-follow-up", "maxkb", "maxkb-follow-up", "lobechat", "lobechat-follow-up", "cherry-studio",
    "cherry-studio-follow-up",
})  # fmt: skip
"""Shapes whose documents the request proves, and a move keeps whole; the others are declined with a reason."""
PROVEN_BUT_DECLINED = {
    "fastgpt": "units joined by `------` lines and opened by distinct ids, but written as unescaped JSON whose chunks "
    "hold Markdown rules of their own: no grammar here reads a two-line label",
    "fastgpt-user-quote": "as fastgpt",
    "librechat": "`<contextItem>` elements in one run per file: a move across files would separate a chunk from the "
    "`<file>` that names it",
    "librechat-file-search": "`File:` / `Relevance:` / `Content:` units joined by `---` lines, no counter or closing "
    "label, and Markdown chunks: the join is a guess",
}
"""Shapes whose template labels its units, declined all the same (the reason each is)."""
SHAPES = app_shapes()


def _case(shape: AppShape) -> object:
    if shape.name in KNOWN_WRONG:
        return pytest.param(shape, id=shape.name, marks=pytest.mark.xfail(strict=False, reason=KNOWN_WRONG[shape.name]))
    return pytest.param(shape, id=shape.name)


def test_the_shapes_cover_twenty_five_apps_and_name_the_known_wrong_ones() -> None:
    assert len(SHAPES) >= 46
    assert len({shape.app for shape in SHAPES}) >= 25
    assert set(KNOWN_WRONG) <= {shape.name for shape in SHAPES}
    assert set(INTACT) | set(PROVEN_BUT_DECLINED) <= {shape.name for shape in SHAPES}


def test_a_move_applies_intact_on_four_fifths_of_the_shapes_whose_template_proves_its_units() -> None:
    assert len(INTACT) / (len(INTACT) + len(PROVEN_BUT_DECLINED)) >= 0.8


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_each_unit_is_written_in_the_body_in_order(shape: AppShape) -> None:
    texts = list(slot_texts(shape.body).values())
    assert 3 <= len(shape.units) <= 8, "4 to 8 chunks; Verba and QAnything group them by file"
    assert any(shape.question in text for text in texts)
    joined = "\x00".join(texts)
    positions = [joined.find(unit.strip()) for unit in shape.units]
    assert all(p >= 0 for p in positions)
    assert positions == sorted(positions)


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_parsed_and_rendered_without_moving_the_body_comes_back_byte_for_byte(shape: AppShape) -> None:
    assert parse_as_detect_does(copy.deepcopy(shape.body)).render() == shape.body


@pytest.mark.parametrize("shape", [_case(shape) for shape in SHAPES])
def test_reversed_documents_move_whole_or_the_request_is_left_as_it_came(shape: AppShape) -> None:
    result = shape_outcome(shape)
    assert result.outcome != "wrong", f"{result.detection}: {result.reason}"


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_the_shapes_whose_units_are_proven_are_moved_whole_and_the_others_declined(shape: AppShape) -> None:
    outcome = shape_outcome(shape).outcome
    assert outcome == ("intact" if shape.name in INTACT else "declined")
