"""How often a real question shares a content word with the passage that answers it: the share of `shadow` probes
whose question a ranker that matches words can find its needle by (`literal`, `one-hop`) against the share it cannot
(`nolima`). Words as the `lexical` ranker reads them: bm25s's tokenizer, English stop words dropped, Snowball stems.

    .venv/bin/python scripts/question_overlap.py --data ../shared/data > docs/results/probe-mix/README.md
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import bm25s
import Stemmer

STEM = Stemmer.Stemmer("english").stemWords


def words(text: str) -> set[str]:
    (tokens,) = bm25s.tokenize([text], stopwords="en", stemmer=STEM, show_progress=False, return_ids=False)
    return set(tokens)


def nq(data: Path) -> Iterator[tuple[str, str]]:
    with gzip.open(data / "litm/nq-open-oracle.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            gold = next(c for c in row["ctxs"] if c.get("isgold", True))
            yield row["question"], f"{gold.get('title', '')} {gold['text']}"


def squad(data: Path) -> Iterator[tuple[str, str]]:
    for article in json.loads((data / "squad/squad-v2.0-dev.json").read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if not qa.get("is_impossible"):
                    yield qa["question"], paragraph["context"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args(argv)
    print("# How often a question shares a word with its answer's passage\n")
    print((__doc__ or "").split("\n\n")[0].replace("\n", " ") + "\n")
    print("| data | file sha256 | questions | share a content word | share none |")
    print("|---|---|---|---|---|")
    for name, rows, path in (
        ("NQ-Open (Lost in the Middle's oracle file)", nq(args.data), "litm/nq-open-oracle.jsonl.gz"),
        ("SQuAD 2.0 dev, answerable", squad(args.data), "squad/squad-v2.0-dev.json"),
    ):
        pairs = list(rows)
        shared = sum(1 for question, passage in pairs if words(question) & words(passage))
        digest = hashlib.sha256((args.data / path).read_bytes()).hexdigest()[:16]
        print(f"| {name} | `{digest}...` | {len(pairs)} | {shared} ({shared / len(pairs):.1%}) | "
              f"{len(pairs) - shared} ({1 - shared / len(pairs):.1%}) |")  # fmt: skip
    print("\nWritten by `.venv/bin/python scripts/question_overlap.py --data ../shared/data`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
