"""What stemming costs the `lexical` ranker: the same 20-document rankings (SQuAD 2.0 dev paragraphs, their first
100 words) with words as written and with English stems, side by side in one process, each after a warm-up round.

    .venv/bin/python scripts/bench_stemming.py --data ../shared/data [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from contextlift.strategies.rankers.lexical import bm25_scores

QUESTION = "What did the committee decide about the regional elections in 1998?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    articles = json.loads((args.data / "squad/squad-v2.0-dev.json").read_text(encoding="utf-8"))["data"]
    paragraphs = [" ".join(p["context"].split()[:100]) for a in articles for p in a["paragraphs"]][:400]
    batches = [paragraphs[i : i + 20] for i in range(0, len(paragraphs), 20)]
    best = {}
    for language in ("none", "english"):
        for batch in batches:  # warm-up: imports, the stemmer's first words
            bm25_scores(QUESTION, batch, language)
    for _ in range(args.rounds):
        for language in ("none", "english"):
            started = time.perf_counter()
            for batch in batches:
                bm25_scores(QUESTION, batch, language)
            each = (time.perf_counter() - started) / len(batches) * 1000
            best[language] = min(best.get(language, each), each)
    for language, ms in best.items():
        print(f"{language:8} {ms:.2f} ms per 20-document ranking (best of {args.rounds} rounds of {len(batches)})")
    print(f"ratio    {best['english'] / best['none']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
