"""Whether two eval runs gave the same answers: the requests both response caches hold (the same model, strategy and
body), and how many of them got the same answer text from the same upstream. Run from the repository root:

    .venv/bin/python scripts/same_answers.py FIRST.jsonl SECOND.jsonl

Exits 1 where an answer differs, or where the two runs share no request or no upstream.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextlift.eval.cache import ResponseCache


def main(first: Path, second: Path) -> int:
    a, b = ResponseCache(first), ResponseCache(second)
    shared = sorted(set(a.keys()) & set(b.keys()))
    pairs = [(a.get(key), b.get(key)) for key in shared]
    same_upstream = [(x, y) for x, y in pairs if x and y and x.upstream == y.upstream and x.upstream]
    differing = [(x, y) for x, y in same_upstream if (x.answer, x.error) != (y.answer, y.error)]
    upstreams = Counter(x.upstream for x, _ in same_upstream)
    runs = {x.run for x, _ in pairs if x} | {y.run for _, y in pairs if y}
    named = ", ".join(f"{u} x{n}" for u, n in upstreams.items()) or "none"
    print(f"{len(shared)} requests in both ({len(runs)} runs); {len(same_upstream)} answered by the same upstream "
          f"({named}); {len(differing)} answers differ")  # fmt: skip
    for x, y in differing[:10]:
        print(f"  {x.strategy}: {x.answer[:60]!r} / {y.answer[:60]!r}")
    return 0 if same_upstream and not differing else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
