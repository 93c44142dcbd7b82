"""`reorder; order=promote` moves only the most relevant documents to the edges and keeps the client's order for
the rest; `filter` drops clear distractors (top k, or outside a margin of the best score) and never all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextlift.strategies.builtin.reorder import arrange
from tests.fakes import FakeEmbedder
from tests.strategies.builtin.test_reorder_edges import DOCS, litm, run

# Ranked best first as the fake embedder ranks DOCS for "do cats purr": 1, 4, then the rest in client order.


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        (1, ["a", "b", "c", "d", "e"]),  # "a" is best and first already: nothing moves
        (2, ["a", "b", "c", "e", "d"]),  # the second best, "d", goes last
        (3, ["a", "c", "b", "e", "d"]),  # the third best, "c", goes second
    ],
)
def test_promote_moves_only_the_top_documents(top: int, expected: list[str]) -> None:
    assert arrange(["a", "d", "c", "e", "b"], "promote", original=["a", "b", "c", "d", "e"], top=top) == expected


@given(st.lists(st.integers(), unique=True, min_size=1, max_size=12), st.data())
def test_promote_is_a_permutation_that_keeps_the_rest_in_order(original: list[int], data: st.DataObject) -> None:
    ranked = data.draw(st.permutations(original))
    top = data.draw(st.integers(1, len(original) + 2))
    placed = arrange(ranked, "promote", original=original, top=top)
    assert sorted(placed) == sorted(original)
    promoted = set(ranked[:top])
    assert [x for x in placed if x not in promoted] == [x for x in original if x not in promoted]
    assert placed[0] == ranked[0]


async def test_promote_through_the_pipeline() -> None:
    upstream, applied = await run("reorder; order=promote; top=2", litm(DOCS[::-1], "do cats purr"))
    assert applied == "reorder; order=promote; top=2"
    lines = [line for line in upstream.prompts[0].splitlines() if line.startswith("Document")]
    # Client order: rivers, cats-and-dogs, moon, dogs, cats-purr. Best (cats purr) first, second best last.
    assert [line.split(") ", 1)[1] for line in lines] == [
        "cats purr softly",
        "rivers flow",
        "the moon orbits earth",
        "dogs bark loudly",
        "cats and dogs play",
    ]


async def test_filter_keeps_the_top_k_in_the_clients_order() -> None:
    upstream, applied = await run("filter; top=2; margin=2", litm(DOCS, "do cats purr"))
    assert applied == "filter; top=2; margin=2.0; dropped=3"
    lines = [line for line in upstream.prompts[0].splitlines() if line.startswith("Document")]
    assert lines == ["Document [1](Title: T1) cats purr softly", "Document [2](Title: T4) cats and dogs play"]


@pytest.mark.parametrize("margin", [0.0, 0.2, 0.4, 0.6, 1.0])
async def test_filter_by_margin_drops_only_what_is_far_from_the_best(margin: float) -> None:
    vectors = FakeEmbedder().embed(["do cats purr", *(f"T{i}\n{d}" for i, d in enumerate(DOCS, 1))])
    scores = vectors[1:] @ vectors[0]
    within = [d for d, score in zip(DOCS, scores, strict=True) if score >= scores.max() - margin]
    # MiniLM's cosine (here the fake embedder's) is read on its own scale: the margin is in its units.
    upstream, _ = await run(f"filter; margin={margin}; ranker=minilm", litm(DOCS, "do cats purr"))
    lines = [line for line in upstream.prompts[0].splitlines() if line.startswith("Document")]
    assert [line.split(") ", 1)[1] for line in lines] == within


async def test_filter_never_drops_every_document() -> None:
    upstream, _ = await run("filter; margin=0", litm(DOCS, "zebra"))
    # Every score is 0 for an unrelated question: all are within 0 of the best, none is dropped.
    assert upstream.prompts[0].count("Document [") == 5
    upstream, _ = await run("filter; top=1; margin=0", litm(DOCS, "zebra"))
    assert upstream.prompts[0].count("Document [") == 1


async def test_filter_then_reorder_compose() -> None:
    upstream, applied = await run("filter; top=3; margin=2, reorder; order=descending", litm(DOCS, "do cats purr"))
    assert applied == "filter; top=3; margin=2.0; dropped=2, reorder; order=descending"
    assert upstream.prompts[0].count("Document [") == 3


async def test_the_default_order_promotes_the_best_document_and_keeps_the_rest() -> None:
    upstream, applied = await run("reorder", litm(DOCS[::-1], "do cats purr"))
    assert applied == "reorder"
    lines = [line for line in upstream.prompts[0].splitlines() if line.startswith("Document")]
    assert [line.split(") ", 1)[1] for line in lines] == [
        "cats purr softly",
        "rivers flow",
        "cats and dogs play",
        "the moon orbits earth",
        "dogs bark loudly",
    ]
