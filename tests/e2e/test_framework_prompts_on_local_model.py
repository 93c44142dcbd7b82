"""End to end: requests that LangChain, LlamaIndex and DSPy really built, replayed with the real openai
SDK through `contextlift serve` to the real SmolLM2 model: the documents are found, the shape is named, and the
strategy's answer is a valid completion."""

from __future__ import annotations

import copy
import re

import openai
import pytest

from tests.strategies.framework_prompts import framework_prompts

pytestmark = pytest.mark.e2e

# Not the agent shapes: llama.cpp's server refuses an assistant message whose content is null (the tool call's),
# sent straight to it as much as through the proxy; the fake-upstream tests cover those shapes.
SHAPES = {
    "llamaindex-query-engine": "metadata-blocks; region=fence",
    "dspy-context": "numbered; region=label",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_framework_request_is_reordered_on_the_real_model(sdk: openai.OpenAI, name: str) -> None:
    prompt = next(p for p in framework_prompts() if p.name == name)
    body = copy.deepcopy(prompt.body)
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2",
        messages=body["messages"],
        max_tokens=16,
        extra_headers={"X-Context-Strategy": "reorder"},
    )
    assert raw.headers["x-context-format"] == SHAPES[name]
    assert raw.headers["x-context-documents"] == str(len(prompt.documents))
    # It moves, or, where its ranker is not sure of the first document, says so and sends the order as it came.
    assert re.fullmatch(r"reorder(; skipped=margin; margin=0\.\d{3})?", raw.headers["x-context-strategy"])
    assert raw.parse().choices[0].message.content is not None


def test_langchains_default_join_keeps_its_order_and_the_real_model_answers(sdk: openai.OpenAI) -> None:
    # Its documents are joined by blank lines alone: a chunk's own paragraph break would look the same, so the proxy
    # moves nothing (tests/strategies/detection/test_real_chunks_never_split.py) and the model answers all the same.
    prompt = next(p for p in framework_prompts() if p.name == "langchain-stuff-system")
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2",
        messages=copy.deepcopy(prompt.body)["messages"],
        max_tokens=16,
        extra_headers={"X-Context-Strategy": "reorder"},
    )
    assert raw.headers["x-context-format"] == "none: ambiguous-chunks"
    assert raw.headers["x-context-documents"] == "0"
    # The move is declined and says why; the operator's unproven_fallback (excerpt by default) runs in its place.
    assert raw.headers["x-context-strategy"].startswith("reorder -> excerpt: ambiguous-chunks; ")
    assert raw.parse().choices[0].message.content is not None
