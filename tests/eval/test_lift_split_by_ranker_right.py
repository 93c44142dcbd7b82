"""A ranked pipeline's lift is split by whether its ranker put the gold first on each case, and the report says
whether the ranker's margin, or two rankers agreeing, tells those cases apart: by hand on scripted samples, and on a
small `contextlift eval` run in front of a fake upstream that answers with the excerpt it was shown."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextlift.eval import case_rankings
from contextlift.eval.case_rankings import margin, pipeline_ranker
from contextlift.eval.cases import REASKED, Sample
from contextlift.eval.verdicts.ranker_split import auc, ranker_signal, ranker_split, signal_lift, youden_threshold
from contextlift.proxy.cli import main
from contextlift.proxy.policy import ranker_margin
from tests.fakes import FakeEmbedder, completion
from tests.serving import fake_upstream_url, request_body

QUOTED = re.compile(r'Relevant excerpt[^\n]*\n"{3,}\n(.*?)\n"{3,}', re.S)


def sample(case: int, strategy: str, score: float, rankings: dict[str, Any], variant: str = "hard") -> Sample:
    key = f"litm-qa|{variant}|10|0|{case}"
    return Sample(
        "litm-qa", variant, 10, 0, case, strategy, key, "h", "best_subspan_em", ("x",), "", score, ranking=rankings
    )


def reading(gold_rank: int, value: float, first: int = 0) -> dict[str, Any]:
    return {"first": first, "gold_rank": gold_rank, "margin": value}


def case_ranking(right: bool, value: float, agree: bool = True) -> dict[str, Any]:
    lexical = reading(1 if right else 2, value, first=0)
    minilm = reading(1 if right else 2, value, first=0 if agree else 1)
    return {"units": 10, "gold": [0], "rankers": {"lexical": lexical, "minilm": minilm}}


def test_a_pipeline_ranks_with_its_named_ranker_else_the_default() -> None:
    assert pipeline_ranker("focus; ranker=minilm") == "minilm"
    assert pipeline_ranker("excerpt") == "lexical"
    assert pipeline_ranker("filter; ranker=fusion, reorder") == "fusion"
    assert pipeline_ranker("none") is None
    assert pipeline_ranker("medoid; k=5") is None


def test_the_margin_is_the_one_the_proxys_policies_read() -> None:
    for scores in ([0.9, 0.5, 0.1], [3.0, 3.0, 1.0], [1.0, 1.0], [2.0], [0.2, 0.7, 0.65, 0.1]):
        assert margin(scores) == ranker_margin(scores)


def test_the_split_pairs_each_case_in_the_half_its_ranker_put_it() -> None:
    # Cases 0-3: lexical right, the step wins 3 and loses none; cases 4-7: lexical wrong, the step loses 2.
    samples = []
    for case in range(8):
        right = case < 4
        rankings = case_ranking(right, 0.5)
        samples.append(sample(case, "none", 0.0 if right else 1.0, rankings))
        treated = (1.0 if case < 3 else 0.0) if right else (0.0 if case < 6 else 1.0)
        samples.append(sample(case, "excerpt; ranker=lexical; gate=0", treated, rankings))
    reasked = [sample(4, REASKED, 0.0, case_ranking(False, 0.5)), sample(0, REASKED, 0.0, case_ranking(True, 0.5))]
    rows = {row["half"]: row for row in ranker_split(samples, reasked)}
    assert (rows["right"]["n"], rows["right"]["wins"], rows["right"]["losses"]) == (4, 3, 0)
    assert rows["right"]["value"] == pytest.approx(0.75)
    assert (rows["wrong"]["n"], rows["wrong"]["wins"], rows["wrong"]["losses"]) == (4, 0, 2)
    assert rows["wrong"]["value"] == pytest.approx(-0.5)
    # The A/A floor per half: case 4 (wrong half) changed its score when asked again, case 0 (right half) did not.
    assert (rows["wrong"]["floor"], rows["wrong"]["reasked"]) == (1.0, 1)
    assert (rows["right"]["floor"], rows["right"]["reasked"]) == (0.0, 1)
    assert rows["right"]["family"] == 1
    assert rows["right"]["p_holm"] == rows["right"]["p"]


def test_a_margin_that_separates_right_from_wrong_reads_as_such() -> None:
    # Right cases lead by 0.6-0.9, wrong ones by 0.1-0.3: the threshold chosen on the even cases holds on the odd.
    samples = []
    for case in range(12):
        right = case % 3 != 0
        value = (0.6 + case / 40) if right else (0.1 + case / 60)
        rankings = case_ranking(right, value, agree=right)
        samples += [sample(case, "none", 0.0, rankings), sample(case, "focus", float(right), rankings)]
    signal = {row["ranker"]: row for row in ranker_signal(samples)}
    lexical = signal["lexical"]
    assert (lexical["n"], lexical["right"]) == (12, 8)
    assert lexical["auc"] == 1.0
    assert lexical["threshold"] == pytest.approx((0.2 + 0.65) / 2)
    check = lexical["check"]
    assert check["right_above"] == check["n_above"] > 0
    assert check["right_below"] == 0 < check["n_below"]
    assert lexical["agree"] == {"n_agree": 8, "right_agree": 8, "n_disagree": 4, "right_disagree": 0}
    lifts = {row["part"]: row for row in signal_lift(samples, list(signal.values()))}
    assert lifts["margin above"]["value"] == 1.0
    assert lifts["margin below"]["value"] == 0.0
    assert (lifts["agree"]["n"], lifts["disagree"]["n"]) == (8, 4)


def test_auc_and_threshold_by_hand() -> None:
    value, (low, high) = auc([0.9, 0.8, 0.4], [0.5, 0.1])
    assert value == pytest.approx(5 / 6)
    assert 0 <= low < value < high <= 1
    assert auc([0.5], [0.5])[0] == 0.5
    perfect, (low, high) = auc([0.9, 0.8], [0.1])
    assert perfect == 1.0
    assert low < 0.25  # one negative: no interval as narrow as a point
    assert high == 1.0
    assert youden_threshold([(0.9, True), (0.8, True), (0.4, True), (0.5, False), (0.1, False)]) == pytest.approx(0.65)
    assert youden_threshold([(0.9, True), (0.1, True)]) is None


async def echoing_excerpt(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A fake upstream: lists one model; answers with the first passage the proxy quoted (on one line), or
    `unknown` where the prompt quotes none. An answer is then right exactly where the quoted unit holds it."""
    if scope["type"] != "http":
        return
    body = json.loads(await request_body(receive) or b"{}")
    if scope["path"].endswith("/models"):
        payload: dict[str, Any] = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
    else:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        quoted = QUOTED.search(text)
        payload = completion(" ".join(quoted.group(1).split()) if quoted else "unknown")
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with fake_upstream_url(echoing_excerpt) as url:
        yield url


def test_a_scripted_run_reports_the_step_winning_only_where_the_ranker_was_right(
    upstream_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(case_rankings, "load_embedder", FakeEmbedder)
    out = tmp_path / "report"
    arguments = ["eval", "--upstream", upstream_url, "--tasks", "litm-qa", "--sizes", "litm-qa=10"]
    arguments += ["--positions", "0%,100%", "--samples", "2", "--reasked", "2", "--retries", "0"]
    arguments += ["--option", "litm-qa.distractors=easy,hard", "--out", str(out), "--cache", str(tmp_path / "c")]
    assert main([*arguments, "--strategies", "none", "--strategies", "excerpt; ranker=lexical; gate=0"]) == 0
    data = json.loads((out / "results.json").read_text())
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    ranked = [s for s in samples if s["strategy"] == "excerpt; ranker=lexical; gate=0"]
    assert ranked
    assert all(s["ranking"]["rankers"]["lexical"]["gold_rank"] >= 1 for s in ranked)
    for s in ranked:
        # The eval's ranking is the proxy's: the unit it ranks first is the one the proxy quoted.
        assert f"quoted={s['ranking']['rankers']['lexical']['first'] + 1}" in s["applied"]
        assert s["score"] == float(s["ranking"]["rankers"]["lexical"]["gold_rank"] == 1)
    for row in data["ranker_split"]:
        if row["n"]:
            assert row["value"] == (1.0 if row["half"] == "right" else 0.0), row
            assert row["wins"] == (row["n"] if row["half"] == "right" else 0)
    assert sum(r["n"] for r in data["ranker_split"]) == len(ranked)
    assert data["ranker_check"] == {"compared": len(ranked), "matched": len(ranked)}
    assert {r["ranker"] for r in data["ranker_signal"]} >= {"lexical", "minilm", "fusion"}
    report = (out / "report.md").read_text()
    assert "## Lift by whether the ranker was right" in report
    assert "## A signal at request time" in report
    assert f"quoted in {len(ranked)} of {len(ranked)} answers" in report
