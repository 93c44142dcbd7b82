"""`contextlift eval-rankers`: each ranker's rank of the gold document on litm-qa cases, detected as the proxy
detects them; the `retriever` regime moves the gold to a rank a retriever would give it, and `client` then ranks
it exactly there."""

from __future__ import annotations

import json
from pathlib import Path

from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.ranker_quality import RETRIEVER, gold_ranks, retriever_ordered, run, summarise
from contextlift.eval.sources import find_sources
from contextlift.strategies import parse_request
from tests.fakes import FakeEmbedder


def hard_cases(samples: int = 4) -> list:  # type: ignore[type-arg]
    plan = make_plan("full", ["litm-qa"], ["none"], ["10"], ["0%,50%,100%"], [str(samples)],
                     ["litm-qa.distractors=hard"], 0)  # fmt: skip
    cases, _ = build_cases(plan, find_sources(None))
    return [c for c in cases if c.position is not None]


async def test_client_ranks_the_gold_where_the_client_put_it() -> None:
    cases = hard_cases()
    ranks = await gold_ranks(cases, ["client"], None)
    assert [r["rank"] for r in ranks] == [c.position + 1 for c in cases]


def test_the_retriever_regime_moves_only_the_gold() -> None:
    firsts = [c for c in hard_cases(samples=12) if c.position == 0]
    moved = retriever_ordered(firsts, seed=0)
    assert {c.variant for c in moved} == {RETRIEVER}
    assert len({c.position for c in moved}) > 1  # drawn, not fixed
    for before, after in zip(firsts, moved, strict=True):
        old = parse_request({"model": "m", "messages": before.messages}).documents
        new = parse_request({"model": "m", "messages": after.messages}).documents
        assert new[after.position].text == old[0].text  # the gold, now at its drawn rank
        assert [d.text for d in new if d.text != old[0].text] == [d.text for d in old[1:]]


def test_the_summary_counts_gold_first_and_mrr() -> None:
    rows = summarise([{"variant": "hard", "size": 10, "ranker": "x", "rank": r} for r in (1, 2, 4, 1)])
    assert rows == [
        {
            "variant": "hard",
            "size": 10,
            "ranker": "x",
            "gold_first": 2,
            "n": 4,
            "gold_first_ci95": rows[0]["gold_first_ci95"],
            "mrr": (1 + 0.5 + 0.25 + 1) / 4,
        }
    ]


def test_the_command_writes_its_table(tmp_path: Path) -> None:
    rows = run(tmp_path, [10], 2, ["easy", "retriever"], ["client", "lexical", "minilm"], None, 0, FakeEmbedder())
    assert {(r["variant"], r["ranker"]) for r in rows} >= {("standard", "lexical"), (RETRIEVER, "client")}
    assert json.loads((tmp_path / "rankers.json").read_text()) == rows
    assert "| standard | 10 | client | 2/6 |" in (tmp_path / "rankers.md").read_text()
