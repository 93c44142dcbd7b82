"""End to end: every strategy and a pipeline on a 10-document Lost in the Middle request, against the real
SmolLM2 model and the real all-MiniLM-L6-v2 embedder, streamed and not."""

from __future__ import annotations

from typing import Any

import openai
import pytest

pytestmark = pytest.mark.e2e

FACTS = [
    ("Quellmoor", "The capital of the kingdom of Zorvath is Quellmoor, a city of blue stone."),
    ("Brindle", "Brindle is a river town known for its ferries and its autumn fair."),
    ("Ostmark", "Ostmark exports copper, wool and salted fish to its neighbours."),
    ("Vellan Sea", "The Vellan Sea freezes over every third winter."),
    ("Harrowgate", "Harrowgate was founded by weavers who fled the northern wars."),
    ("Mount Ilse", "Mount Ilse is the tallest peak of the Corran range."),
    ("Tessaly", "Tessaly's library holds nine thousand handwritten books."),
    ("Dunmore", "Dunmore's bridge has seven arches of red brick."),
    ("Caddock", "Caddock is famous for a cheese aged in caves."),
    ("Loris", "Loris elects its mayor by drawing coloured stones."),
]
ORDER = [1, 2, 3, 4, 0, 5, 6, 7, 8, 9]  # the gold document in the middle
PROMPT = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).\n\n"
    + "\n".join(f"Document [{i}](Title: {FACTS[j][0]}) {FACTS[j][1]}" for i, j in enumerate(ORDER, 1))
    + "\n\nQuestion: what is the capital of the kingdom of Zorvath?\nAnswer:"
)
MESSAGES: Any = [{"role": "user", "content": PROMPT}]
SELECTIONS = [
    "reorder",
    "query-aware",
    "recite",
    "fact; rounds=2",
    "medoid; k=3; seed=1",
    "reorder, query-aware, medoid; k=3",
    "focus",
    "excerpt",
    "repeat",
]


@pytest.mark.parametrize("selection", SELECTIONS)
def test_strategy_returns_a_valid_completion(sdk: openai.OpenAI, selection: str) -> None:
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2", messages=MESSAGES, max_tokens=24, temperature=0.7,
        extra_headers={"X-Context-Strategy": selection},
    )  # fmt: skip
    result = raw.parse()
    assert raw.headers["x-context-documents"] == "10"
    assert raw.headers["x-context-strategy"].startswith(selection.split(";")[0])
    assert int(raw.headers["x-context-upstream-calls"]) >= 1
    assert result.choices[0].message.content is not None
    assert result.usage is not None
    assert result.usage.total_tokens > 0


@pytest.mark.parametrize("selection", SELECTIONS)
def test_strategy_streams_a_valid_completion(sdk: openai.OpenAI, selection: str) -> None:
    stream = sdk.chat.completions.create(
        model="smollm2", messages=MESSAGES, max_tokens=24, stream=True, stream_options={"include_usage": True},
        extra_headers={"X-Context-Strategy": selection},
    )  # fmt: skip
    chunks = list(stream)
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


def test_chain_reads_the_documents_in_chunks_and_answers(sdk: openai.OpenAI) -> None:
    # 100 cl100k tokens take four of these documents: three chunks, three workers and the manager.
    selection = "chain; chunk_tokens=100; max_tokens=48"
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2", messages=MESSAGES, max_tokens=24, temperature=0.0,
        extra_headers={"X-Context-Strategy": selection},
    )  # fmt: skip
    result = raw.parse()
    assert raw.http_response.status_code == 200
    assert raw.headers["x-context-strategy"].startswith(f"{selection}; chunks=3")
    assert "fallback" not in raw.headers["x-context-strategy"]
    assert int(raw.headers["x-context-upstream-calls"]) >= 4
    assert result.choices[0].message.content is not None
    assert result.usage is not None
    assert result.usage.completion_tokens > 0


def test_repeat_doubles_the_prompt_the_model_reads(sdk: openai.OpenAI) -> None:
    once = sdk.chat.completions.create(model="smollm2", messages=MESSAGES, max_tokens=1, temperature=0)
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2", messages=MESSAGES, max_tokens=1, temperature=0, extra_headers={"X-Context-Strategy": "repeat"}
    )
    twice = raw.parse()
    assert once.usage is not None
    assert twice.usage is not None
    # The model's own count of prompt tokens: about twice the prompt (its chat template is counted once).
    assert 1.8 * once.usage.prompt_tokens <= twice.usage.prompt_tokens <= 2.0 * once.usage.prompt_tokens
    # The header counts cl100k tokens, the model its own: the same text, not the same tokenizer.
    added = int(raw.headers["x-context-strategy"].rsplit("tokens=+", 1)[1])
    model_added = twice.usage.prompt_tokens - once.usage.prompt_tokens
    assert 0.5 * model_added <= added <= 2 * model_added


def test_a_move_on_marked_up_chunks_moves_nothing_and_the_model_answers(sdk: openai.OpenAI) -> None:
    chunks = ["## Zorvath\n\nThe capital of the kingdom of Zorvath is Quellmar.", *(f for _, f in FACTS[1:4])]
    prompt = "Use the following pieces of retrieved context to answer the question.\n\n" + "\n\n---\n\n".join(chunks)
    messages: Any = [{"role": "system", "content": prompt}, {"role": "user", "content": "What is Zorvath's capital?"}]
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2", messages=messages, max_tokens=24, extra_headers={"X-Context-Strategy": "reorder"}
    )
    # Nothing moves; the default fallback quotes the best passage before the question where its ranker is sure.
    assert raw.headers["x-context-strategy"].startswith("reorder -> excerpt: unproven-boundaries; ")
    assert raw.headers["x-context-format"] == "none: unproven-boundaries"
    assert raw.parse().choices[0].message.content is not None
