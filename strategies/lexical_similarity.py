"""A similarity between short texts that needs no model: where the embeddings extra (torch, sentence-transformers,
all-MiniLM-L6-v2) is not installed, `medoid` compares its answers with it and says so (`similarity=lexical` in
`X-Context-Strategy`), never silently.

Each text becomes the counts of its lower-cased words (runs of letters and digits), log-scaled (1 + log n) and
hashed into `DIMENSIONS` slots, then scaled to unit length: the dot product of two is the cosine of their word
counts. "Paris" and "It is Paris." share one word of three (0.58); two different names share none (0.0). It reads
words, not meaning: "Lutetia" and "Paris" are as far apart as any two names.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence

import numpy as np

from contextlift.strategies.embedder import MAX_EMBEDDED_CHARS, Vectors

NAME = "lexical"
DIMENSIONS = 4096
"""Slots words are hashed into: answers hold tens of words, so two distinct words rarely share one."""
_WORD = re.compile(r"\w+")


class LexicalSimilarity:
    """An `Embedder` of word counts: unit-length rows whose dot products are cosine similarities of words."""

    name = NAME

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = Counter(w.lower() for w in _WORD.findall(text[:MAX_EMBEDDED_CHARS]))
            for word, count in counts.items():
                rows[row, zlib.crc32(word.encode("utf-8", "surrogatepass")) % DIMENSIONS] += 1.0 + math.log(count)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows /= np.maximum(norms, 1e-12)
        return rows
