"""The embedder cuts each text to the prefix the model can read before tokenising it: a 5 MB document is not
tokenised whole only to be truncated to 256 word pieces, and the cache is keyed by what the model reads."""

from __future__ import annotations

from typing import Any

import numpy as np

from contextlift.strategies import SentenceTransformerEmbedder
from contextlift.strategies.embedder import DIMENSIONS, MAX_EMBEDDED_CHARS
from tests.fakes import FakeEmbedder


class RecordingFakeModel:
    """Stands in for the sentence-transformers model: records the texts it is asked to encode."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: list[str], **_: Any) -> Any:
        self.encoded.extend(texts)
        return np.pad(FakeEmbedder().embed(texts), ((0, 0), (0, DIMENSIONS - 64)))


def embedder_with_fake_model() -> tuple[SentenceTransformerEmbedder, RecordingFakeModel]:
    embedder = SentenceTransformerEmbedder()
    model = RecordingFakeModel()
    embedder._model = model
    return embedder, model


def test_a_five_megabyte_text_reaches_the_model_cut_to_the_bound() -> None:
    embedder, model = embedder_with_fake_model()
    long = "word " * 1_000_000
    vectors = embedder.embed(["short question", long])
    assert vectors.shape == (2, DIMENSIONS)
    assert model.encoded == ["short question", long[:MAX_EMBEDDED_CHARS]]


def test_texts_differing_only_past_the_bound_share_one_cache_entry() -> None:
    embedder, model = embedder_with_fake_model()
    prefix = "x" * MAX_EMBEDDED_CHARS
    first = embedder.embed([prefix + "tail one"])
    second = embedder.embed([prefix + "another tail"])
    assert np.array_equal(first, second)
    assert (embedder.misses, embedder.hits) == (1, 1)
    assert model.encoded == [prefix]


def test_texts_differing_before_the_bound_are_cached_apart() -> None:
    embedder, model = embedder_with_fake_model()
    embedder.embed(["a" + "x" * MAX_EMBEDDED_CHARS, "b" + "x" * MAX_EMBEDDED_CHARS])
    assert embedder.misses == 2
    assert len(model.encoded) == 2


def test_a_lone_surrogate_does_not_break_the_cache_key() -> None:
    embedder, _ = embedder_with_fake_model()
    embedder.embed(["broken \ud800 text", "broken \ud801 text"])
    assert embedder.misses == 2
