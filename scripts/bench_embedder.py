"""Benchmark: the embedder's throughput on CPU and (when there is one) GPU, cold and from its cache, side by
side in one run. Prints documents per second and the ratios.

    .venv/bin/python scripts/bench_embedder.py --documents 2000
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from contextlift.strategies.embedder import SentenceTransformerEmbedder

WORDS = ["river", "city", "capital", "founded", "weaver", "mountain", "copper", "wool", "harbour", "bridge"]
WORDS += ["library", "mayor", "stone", "winter"]


def documents(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(100)) + f" #{i}" for i in range(count)]


def measure(device: str, dtype: str, texts: list[str], model_dir: Path | None) -> tuple[float, float, float]:
    import torch

    embedder = SentenceTransformerEmbedder(device=device, cache_size=len(texts) * 2, model_dir=model_dir)
    started = time.perf_counter()
    embedder.load()
    # The weights may be stored in either precision (the device copy travels as fp16): run in the one asked.
    embedder._model.to(getattr(torch, dtype))
    embedder.embed(texts[:64])  # warm-up: kernels, allocator
    load = time.perf_counter() - started
    cold = texts[64:]
    started = time.perf_counter()
    embedder.embed(cold)
    cold_rate = len(cold) / (time.perf_counter() - started)
    started = time.perf_counter()
    embedder.embed(cold)
    cached_rate = len(cold) / (time.perf_counter() - started)
    return load, cold_rate, cached_rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=2000)
    parser.add_argument("--model-dir", type=Path, help="all-MiniLM-L6-v2 files; default: the bundled package")
    args = parser.parse_args()
    import torch

    texts = documents(args.documents, seed=0)
    runs = [("cpu", "float32")] + ([("cuda", "float32"), ("cuda", "float16")] if torch.cuda.is_available() else [])
    rows = {f"{d} {t}": measure(d, t, texts, args.model_dir) for d, t in runs}
    threads = torch.get_num_threads()
    print(f"{args.documents - 64} documents of ~100 words; torch {torch.__version__}, {threads} CPU threads")
    print(f"{'run':<14} {'load s':>7} {'cold docs/s':>12} {'cached docs/s':>14} {'cold vs cpu':>12}")
    for run, (load, cold, cached) in rows.items():
        ratio = cold / rows["cpu float32"][1]
        print(f"{run:<14} {load:>7.2f} {cold:>12.0f} {cached:>14.0f} {ratio:>11.1f}x")


if __name__ == "__main__":
    main()
