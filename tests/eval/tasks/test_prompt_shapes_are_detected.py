"""Every eval prompt shape is one the proxy reads: each case's documents are found, all of them, with its
question, so the lift measured in a shape is the strategies' and not a detection miss."""

from __future__ import annotations

import pytest

from eval.cases import Grid
from eval.sources import Sources
from eval.tasks import litm_qa
from eval.tasks.prompt_shapes import SHAPES
from strategies import parse_request

EXPECTED = {
    "paper": "litm",
    "langchain-stuff": "paragraphs; region=cue",
    "langchain-retrievalqa": "paragraphs; region=fence",
    "llamaindex": "metadata-blocks; region=fence",
    "dspy": "numbered; region=label",
}


def test_every_shape_has_an_expected_detection() -> None:
    assert set(SHAPES) == set(EXPECTED)


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_the_proxy_finds_every_document_of_every_case(shape: str) -> None:
    grid = Grid((10, 20), ("0", "9"), 3, options={"prompt": shape})
    cases = [c for c in litm_qa.build(grid, Sources())[0] if c.position is not None]
    # 2 sizes x 2 positions x 3 samples, in each of the default regimes (easy and hard).
    assert sorted(c.variant for c in cases) == ["hard"] * 12 + ["standard"] * 12
    for case in cases:
        request = parse_request({"model": "m", "messages": case.messages})
        assert request.detection == EXPECTED[shape]
        assert len(request.documents) == case.size
        assert request.question
        assert request.question in case.prompt
        assert request.render() == {"model": "m", "messages": case.messages}
