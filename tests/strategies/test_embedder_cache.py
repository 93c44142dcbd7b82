"""The real all-MiniLM-L6-v2 embedder: offline from its package, unit vectors, a bounded content-hash cache,
and a cut of long texts that leaves their vectors as the whole text gives them."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from contextlift.strategies import SentenceTransformerEmbedder
from contextlift.strategies.embedder import CPU_BATCH, GPU_BATCH, MAX_EMBEDDED_CHARS
from tests.benchmark_data import HUMANEVAL, SQUAD, data_file


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


def real_texts() -> dict[str, str]:
    squad = json.loads(data_file(SQUAD).read_text())
    with gzip.open(data_file(HUMANEVAL), "rt") as handle:
        code = [json.loads(line) for line in handle]
    return {
        "prose": "\n\n".join(p["context"] for a in squad["data"][:20] for p in a["paragraphs"]),
        "code": "\n".join(c["prompt"] + c["canonical_solution"] for c in code[:60]),
    }


def test_the_cut_holds_far_more_than_the_256_word_pieces_the_model_reads(embedder: SentenceTransformerEmbedder) -> None:
    for text in real_texts().values():
        assert len(text) > MAX_EMBEDDED_CHARS
        assert len(embedder._model.tokenizer.tokenize(text[:MAX_EMBEDDED_CHARS])) > 4 * 256


def test_a_long_text_embeds_as_the_model_embeds_it_whole(embedder: SentenceTransformerEmbedder) -> None:
    texts = list(real_texts().values())
    whole = embedder._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(embedder.embed(texts), whole, atol=1e-6)


def test_on_a_cpu_texts_of_mixed_lengths_go_in_small_batches_with_the_vectors_one_wide_batch_gives() -> None:
    small = SentenceTransformerEmbedder(device="cpu")
    wide = SentenceTransformerEmbedder(device="cpu", batch_size=64)
    texts = [("word " * n).strip() + f" about topic {n}" for n in (3, 250, 40, 120, 7, 90, 200, 15, 60, 33)]
    small_vectors, wide_vectors = small.embed(texts), wide.embed(texts)
    assert small.batch_size == CPU_BATCH < len(texts)
    assert np.allclose(small_vectors, wide_vectors, atol=1e-5)


def test_on_a_gpu_the_model_runs_in_fp16_and_its_vectors_stay_unit_length_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: the real model is built on the CPU whatever device it is asked for, so what runs is the
    embedder's GPU path (fp16 weights, wide batches) on the real weights."""
    import sentence_transformers

    real = sentence_transformers.SentenceTransformer
    asked: list[str] = []

    def on_cpu(path: str, device: str) -> sentence_transformers.SentenceTransformer:
        asked.append(device)
        return real(path, device="cpu")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", on_cpu)
    gpu = SentenceTransformerEmbedder(device="cuda:0")
    texts = [("word " * n).strip() + f" about topic {n}" for n in (3, 250, 40, 120, 7)]
    vectors = gpu.embed(texts)
    monkeypatch.undo()
    reference = SentenceTransformerEmbedder(device="cpu").embed(texts)

    assert asked == ["cuda:0"]
    assert gpu.batch_size == GPU_BATCH
    assert str(next(gpu._model.parameters()).dtype) == "torch.float16"
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.min(np.sum(vectors * reference, axis=1)) > 0.999
