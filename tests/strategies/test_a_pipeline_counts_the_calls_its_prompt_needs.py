"""A cost or time estimate counts the upstream calls a prompt of its size needs (`Pipeline.upstream_calls`): a chain a
worker per chunk and its manager, one plain call past `max_chunks`; every other pipeline its `max_upstream_calls`."""

from __future__ import annotations

import pytest

from contextlift.strategies import build_registry, parse_selection


def calls(selection: str, prompt_tokens: int) -> int:
    return build_registry().resolve(parse_selection(selection), {}).upstream_calls(prompt_tokens)


@pytest.mark.parametrize(
    ("prompt_tokens", "expected"),
    [(10, 2), (4096, 2), (4097, 3), (16 * 4096, 17), (16 * 4096 + 1, 1)],
)
def test_a_chain_needs_a_worker_per_chunk_and_its_manager(prompt_tokens: int, expected: int) -> None:
    assert calls("chain", prompt_tokens) == expected


def test_a_chains_calls_follow_its_chunk_size_and_never_pass_its_bound() -> None:
    assert calls("chain; chunk_tokens=100", 450) == 6
    pipeline = build_registry().resolve(parse_selection("chain"), {})
    assert max(pipeline.upstream_calls(n) for n in range(0, 20 * 4096, 997)) <= pipeline.max_upstream_calls()


@pytest.mark.parametrize("selection", ["none", "medoid; k=3", "fact", "recite", "pick, reorder", "repeat"])
def test_every_other_pipeline_counts_its_most_calls_whatever_the_prompt(selection: str) -> None:
    pipeline = build_registry().resolve(parse_selection(selection), {})
    assert calls(selection, 50) == calls(selection, 50_000) == pipeline.max_upstream_calls()
