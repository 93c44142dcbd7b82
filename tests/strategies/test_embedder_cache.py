"""The real all-MiniLM-L6-v2 embedder: offline from its package, unit vectors, a bounded content-hash cache."""

from __future__ import annotations

import numpy as np
import pytest

from strategies import SentenceTransformerEmbedder


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder(device="cpu", cache_size=3)
    embedder.load()
    return embedder


def test_vectors_are_unit_length_and_meaningful(embedder: SentenceTransformerEmbedder) -> None:
    vectors = embedder.embed(["What is the capital of France?", "Paris is the capital of France.", "Cats purr."])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_repeated_texts_come_from_the_cache_and_it_stays_bounded(embedder: SentenceTransformerEmbedder) -> None:
    first = embedder.embed(["alpha text", "beta text"])
    hits, misses = embedder.hits, embedder.misses
    again = embedder.embed(["beta text", "alpha text"])
    assert embedder.hits == hits + 2
    assert embedder.misses == misses
    assert np.array_equal(again, first[::-1])
    embedder.embed(["gamma", "delta", "epsilon", "zeta"])
    assert len(embedder._cache) == 3
