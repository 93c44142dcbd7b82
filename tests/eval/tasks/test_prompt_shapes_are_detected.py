"""Every eval prompt shape is one the proxy reads, or declines as it declines the same shape from an app: each
case's documents are found, all of them, with its question, so the lift measured in a shape is the strategies' and
not a detection miss; the shapes whose documents blank lines alone separate (LangChain's default join) are declined
whole (`none: ambiguous-chunks`), so their lift is zero by construction, never a wrong split. With multi-paragraph
chunks (`chunks=paragraphs`) the same holds chunk by chunk."""

from __future__ import annotations

import pytest

from contextlift.eval.cases import Grid
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import litm_qa
from contextlift.eval.tasks.prompt_shapes import SHAPES
from contextlift.strategies import parse_request
from tests.benchmark_data import SQUAD, data_file

EXPECTED = {
    "paper": "litm",
    "langchain-stuff": "none: ambiguous-chunks",
    "langchain-stuff-separated": "separated; region=cue",
    "langchain-retrievalqa": "none: ambiguous-chunks",
    "llamaindex": "metadata-blocks; region=fence",
    "dspy": "numbered; region=label",
}
BLANK_LINE_JOINS = tuple(shape for shape, shown in EXPECTED.items() if shown == "none: ambiguous-chunks")
KEEP_PARAGRAPHS = ("langchain-stuff-separated", "llamaindex")
SPREAD_OVER_LINES = ("paper",)
"""Shapes whose multi-paragraph documents run on past their marker's line."""
"""Shapes that keep a chunk's blank lines (the paper's format puts a document on one line, DSPy indents it)."""


def test_every_shape_has_an_expected_detection() -> None:
    assert set(SHAPES) == set(EXPECTED)


def _check(case_messages: list[dict[str, str]], shape: str, size: int, prompt: str) -> None:
    request = parse_request({"model": "m", "messages": case_messages})
    assert request.detection == EXPECTED[shape]
    assert request.render() == {"model": "m", "messages": case_messages}
    if EXPECTED[shape].startswith("none"):
        assert request.documents == ()
        return
    assert len(request.documents) == size
    assert request.question
    assert request.question in prompt


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_the_proxy_finds_every_document_of_every_case(shape: str) -> None:
    grid = Grid((10, 20), ("0", "9"), 3, options={"prompt": shape})
    cases = [c for c in litm_qa.build(grid, Sources())[0] if c.position is not None]
    # 2 sizes x 2 positions x 3 samples, in each of the default regimes (easy and hard).
    assert sorted(c.variant for c in cases) == ["hard"] * 12 + ["standard"] * 12
    for case in cases:
        _check(case.messages, shape, case.size, case.prompt)


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_multi_paragraph_chunks_are_read_whole_or_declined(shape: str) -> None:
    sources = Sources(squad=data_file(SQUAD))
    grid = Grid((10,), ("0", "9"), 2, options={"prompt": shape, "chunks": "paragraphs"})
    cases = [c for c in litm_qa.build(grid, sources)[0] if c.position is not None]
    assert cases
    for case in cases:
        request = parse_request({"model": "m", "messages": case.messages})
        if shape in SPREAD_OVER_LINES:
            # A document's later paragraphs stand between two `Document [i]` lines: the lines are no proof of where
            # a document ends, and the case is declined rather than a document cut from its paragraphs.
            assert request.documents == ()
            assert request.render() == {"model": "m", "messages": case.messages}
            continue
        _check(case.messages, shape, case.size, case.prompt)
        if shape in KEEP_PARAGRAPHS:
            assert sum("\n\n" in d.text for d in request.documents) >= case.size // 2
