"""`filter`'s default is per ranker, as measured in docs/results/filter-margins: a margin for the rankers measured to
keep the answer-bearing document that way, every document for the others; a margin or `top` the request sets wins,
and only a ranker whose default was never measured says `unmeasured-with=RANKER`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.builtin.relevance_filter import (
    DEFAULT_CUTS,
    LOST_ACCURACY,
    MARGIN_MEASURED_WITH,
    RETENTION_CUTS,
    Cut,
    kept,
)
from contextlift.strategies.rankers import Ranker, RankerSet, Ranking, published_rankers
from contextlift.strategies.request import Document
from tests.strategies.builtin.test_reorder_edges import litm
from tests.strategies.scripted import ScriptedUpstream

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs/results/filter-margins/retention.json"
MODEL_RUNS = (ROOT / "docs/results/reference-filter", ROOT / "docs/results/reference-filter-chunks")
TEXTS = ["alpha", "beta", "gamma", "delta"]


class FakeRerankService(Ranker):
    """A ranker whose scores nobody measured `filter` with, as an operator's rerank service would be."""

    name = "rerank"

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        return [4.0, 1.0, 3.0, 0.0][: len(documents)]


async def kept_texts(selection: str) -> tuple[list[str], str]:
    services = Services(rankers=RankerSet({**published_rankers(), "rerank": FakeRerankService()}))
    registry = build_registry()
    registry.rankers = frozenset(services.ranker_set().rankers)
    upstream = ScriptedUpstream("ok")
    result = await run_pipeline(registry.resolve(parse_selection(selection), {}), parse_request(litm(TEXTS, "q")),
                                upstream, services)  # fmt: skip
    lines = [line for line in upstream.prompts[0].splitlines() if line.startswith("Document")]
    return [line.split(") ", 1)[1] for line in lines], result.applied


def as_cut(rule: str) -> Cut:
    if rule == "every document":
        return Cut()
    kind, value = rule.split(" ")
    return Cut(margin=float(value)) if kind == "margin" else Cut(top=int(value))


def test_each_rankers_default_is_the_rule_the_committed_measurement_chose() -> None:
    chosen = json.loads(RESULTS.read_text())["defaults"]
    assert {ranker: as_cut(rule) for ranker, rule in chosen.items()} == dict(RETENTION_CUTS)
    assert frozenset(chosen) == MARGIN_MEASURED_WITH
    assert dict(DEFAULT_CUTS) == {r: Cut() if r in LOST_ACCURACY else cut for r, cut in RETENTION_CUTS.items()}


def test_a_cut_stays_the_default_only_where_the_committed_model_runs_found_no_loss() -> None:
    # Each ranker's answers paired with none's on the same cases, pooled over the regimes of both reports.
    scores: dict[str, dict[tuple[str, str], float]] = {}
    for report in MODEL_RUNS:
        for line in (report / "samples.jsonl").read_text().splitlines():
            sample = json.loads(line)
            if sample["variant"] not in ("closed-book", "oracle"):
                scores.setdefault(sample["strategy"], {})[(report.name, sample["case"])] = sample["score"]
    none = scores["none"]
    lifts = {}
    for ranker in ("lexical", "minilm", "fusion"):
        mine = scores[f"filter; ranker={ranker}"]
        assert len(mine) == 270
        assert mine.keys() <= none.keys()
        lifts[ranker] = sum(mine[k] - none[k] for k in mine) / len(mine)
    assert {r for r, lift in lifts.items() if lift < 0} == LOST_ACCURACY
    assert lifts["lexical"] == 0  # every document stays: none's own body, none's answers


def test_a_margin_keeps_what_is_within_it_of_the_best_and_top_cuts_after_it() -> None:
    cosines = Ranking([0.2, 0.9, 0.6, 0.5], "minilm", bounded=True)
    assert kept(cosines, DEFAULT_CUTS["minilm"]) == [1, 2]  # 0.5 is more than 0.35 below 0.9
    assert kept(cosines, Cut(margin=0.35, top=1)) == [1]
    assert kept(Ranking([3.0, 9.0, 1.0], "lexical"), Cut(margin=0.8)) == [1, 0]  # rescaled: 1.0, 0.25, 0.0
    assert kept(Ranking([3.0, 9.0, 1.0], "lexical"), Cut()) == [1, 0, 2]


async def test_an_unmeasured_ranker_keeps_every_document_and_says_so() -> None:
    order, applied = await kept_texts("filter; ranker=rerank")
    assert (order, applied) == (TEXTS, "filter; ranker=rerank; gate=unmeasured; unmeasured-with=rerank")


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ("filter; ranker=rerank; margin=0.3", ["alpha", "gamma"]),  # rescaled: 1, 0.25, 0.75, 0
        ("filter; ranker=rerank; top=2", ["alpha", "gamma"]),
        ("filter; ranker=lexical; margin=0; top=2", ["alpha", "beta"]),  # all tie at 0: the client's first two
        ("filter; ranker=client; top=3", ["alpha", "beta", "gamma"]),
    ],
)
async def test_a_margin_or_top_the_request_sets_is_applied(selection: str, expected: list[str]) -> None:
    order, applied = await kept_texts(selection)
    assert order == expected
    assert "unmeasured-with" not in applied
    assert applied.endswith(f"dropped={len(TEXTS) - len(expected)}")
