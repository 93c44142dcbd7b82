"""How detection reads real multi-paragraph chunks, per family of joins: applied intact, declined, or split wrongly.

The prompts are those of tests/strategies/real_chunks.py (LangChain's and LlamaIndex's splitters over SQuAD articles
and Python's reference pages, joined by the frameworks' own chains and templates). A case is `intact` when every
document found is one whole chunk as its framework wrote it, in order; `declined` when nothing was found; `wrong`
otherwise. Run from the repository root:

    .venv/bin/python scripts/chunk_splits.py
"""

from __future__ import annotations

import collections
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextlift.strategies import parse_request
from tests.strategies.real_chunks import FAMILIES, chunk_prompt


def outcome(family: str, source: str, splitter: str) -> tuple[str, str]:
    prompt = chunk_prompt(family, source, splitter)
    request = parse_request(copy.deepcopy(prompt.body))
    if not request.documents:
        return "declined", request.detection
    intact = [d.raw.strip() for d in request.documents] == [w.strip() for w in prompt.written]
    return ("intact" if intact else "wrong"), request.detection


def main() -> int:
    totals: collections.Counter[str] = collections.Counter()
    print("| family | intact | declined | wrong | formats |")
    print("|---|---|---|---|---|")
    for family in FAMILIES:
        counts: collections.Counter[str] = collections.Counter()
        formats: set[str] = set()
        for source in ("squad", "pydoc"):
            for splitter in ("langchain", "llamaindex"):
                result, shown = outcome(family, source, splitter)
                counts[result] += 1
                formats.add(shown)
        totals.update(counts)
        shown_formats = ", ".join(sorted(formats))
        print(f"| {family} | {counts['intact']} | {counts['declined']} | {counts['wrong']} | {shown_formats} |")
    print(f"| all | {totals['intact']} | {totals['declined']} | {totals['wrong']} | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
