"""The one rule behind the report's verdict and `contextlift policy`: an exact paired test (McNemar's for
right/wrong answers), at least ten pairs that differ, Holm's correction over the pipelines of a regime, and no
rule from a smoke test. Known patterns give their exact p-values; only enough evidence yields a rule."""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest

from contextlift.eval.cases import Sample
from contextlift.eval.policy_writer import CostCeiling, write_policy
from contextlift.eval.verdicts.results import RunInfo, results
from contextlift.eval.verdicts.stats import (
    MIN_DISCORDANT,
    detectable_lift,
    holm,
    newcombe_paired,
    paired_lift,
    sign_test,
)
from tests.eval.report.test_best_pipeline_per_regime import sample

PAPER = {"litm-qa": {"name": "litm-qa", "prompt": "paper", "positional": True}}


@pytest.mark.parametrize(
    ("wins", "losses", "p"),
    [
        (1, 0, 1.0),
        (5, 0, 0.0625),
        (4, 0, 0.125),
        (0, 0, 1.0),
        (6, 1, 0.125),
        (40, 2, 2 * (1 + 42 + 861) / 2**42),
        (31, 7, 2 * sum(__import__("math").comb(38, i) for i in range(8)) / 2**38),
    ],
)
def test_the_sign_test_is_exact(wins: int, losses: int, p: float) -> None:
    assert sign_test(wins, losses) == pytest.approx(p, rel=1e-12)
    assert sign_test(losses, wins) == sign_test(wins, losses)


def test_newcombe_matches_the_published_worked_example() -> None:
    # Altman et al. (2000), Statistics with confidence, Table 6.2 (14 both, 5 one only, 0 the other only, 22 neither):
    # difference 0.122, 95% interval 0.011 to 0.226.
    low, high = newcombe_paired(14, 5, 0, 22)
    assert (round(low, 3), round(high, 3)) == (0.011, 0.226)
    # Mirrored table, mirrored interval.
    assert newcombe_paired(14, 0, 5, 22) == pytest.approx((-high, -low))


def test_one_win_of_one_is_no_longer_a_point_interval() -> None:
    lift = paired_lift([1.0], [0.0])
    assert (lift.value, lift.p, lift.test, lift.interval) == (1.0, 1.0, "mcnemar-exact", "newcombe")
    assert lift.low < 0 < lift.high


def test_graded_scores_keep_the_bootstrap_and_the_sign_test() -> None:
    lift = paired_lift([0.5, 1.0, 0.5, 0.25], [0.25, 0.5, 0.5, 0.5])
    assert (lift.wins, lift.losses, lift.test, lift.interval) == (2, 1, "sign-exact", "bootstrap")


def test_holm_steps_down_and_stays_monotone() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2, 0.001]) == pytest.approx([0.2, 0.002])
    assert holm([]) == []


def test_the_detectable_lift_shrinks_with_n_and_grows_with_the_family() -> None:
    at_180, at_30 = detectable_lift(180, 0.5), detectable_lift(30, 0.5)
    assert at_180 is not None
    assert at_30 is not None
    assert 0.1 < at_180 < 0.2 < at_30
    six = detectable_lift(180, 0.5, family=6)
    assert six is not None
    assert six > at_180
    assert detectable_lift(3, 0.5) is None  # too few pairs for any lift to hold
    assert detectable_lift(180, 1.0) is None  # nothing left to lift
    # Fewer pairs that differ (arms that agree) detect a smaller lift than independent arms would.
    agreeing = detectable_lift(180, 0.5, family=6, discordant=0.2)
    assert agreeing is not None
    assert 0.09 < agreeing < six


def samples_for(wins: int, losses: int, n: int) -> list[Sample]:
    """n litm-qa cases: `reorder` right and `none` wrong on the first `wins`, the reverse on the next `losses`,
    both wrong on the rest."""
    out = []
    for i in range(n):
        for strategy, right in (("none", wins <= i < wins + losses), ("reorder", i < wins)):
            out.append(sample(strategy, "standard", i, float(right)))
    return out


def report(folder: Path, samples: list[Sample], profile: str = "full") -> Path:
    info = RunInfo("m", "http://proxy/v1", ("none", "reorder"), 0, profile, (), PAPER)  # type: ignore[arg-type]
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(results(samples, info)))
    (folder / "run.json").write_text(json.dumps(asdict(info)))
    return folder


@pytest.mark.parametrize(
    ("wins", "losses", "n", "p", "rule"),
    [
        (1, 0, 1, 1.0, False),
        (5, 0, 5, 0.0625, False),
        (4, 0, 20, 0.125, False),
        (40, 2, 180, 2 * (1 + 42 + 861) / 2**42, True),
    ],
)
def test_only_enough_evidence_yields_a_verdict_and_a_rule(
    tmp_path: Path, wins: int, losses: int, n: int, p: float, rule: bool
) -> None:
    samples = samples_for(wins, losses, n)
    [best] = results(samples, RunInfo("m", "p", ("none", "reorder"), 0, "full"))["best_pipeline"]
    assert (best["wins"], best["losses"], best["n"]) == (wins, losses, n)
    assert best["p_holm"] == pytest.approx(p, rel=1e-9)
    assert best["verdict"] == ("significant" if rule else "not significant")
    written = tomllib.loads(write_policy([report(tmp_path / "r", samples)], CostCeiling()))
    assert ("rule" in written) is rule
    if rule:
        [only] = written["rule"]
        evidence = only["evidence"]
        assert (evidence["test"], evidence["correction"], evidence["n"]) == ("mcnemar-exact", "holm/1", 180)
        assert evidence["p"] == pytest.approx(p, rel=1e-2)


def test_a_regime_without_a_rule_says_why_with_its_figures(tmp_path: Path) -> None:
    text = write_policy([report(tmp_path / "r", samples_for(5, 0, 5))], CostCeiling())
    assert "rule" not in tomllib.loads(text)
    assert f"at least {MIN_DISCORDANT} pairs that differ" in text
    closest = "Closest: reorder (standard) lift +1.000, wins/losses 5/0, p (Holm) 0.062, n 5"
    assert f"{closest}; about 10 pairs would decide it (this run: 5)." in text


def test_a_smoke_test_never_yields_a_rule(tmp_path: Path) -> None:
    text = write_policy([report(tmp_path / "r", samples_for(40, 2, 180), profile="quick")], CostCeiling())
    assert "rule" not in tomllib.loads(text)
    assert "smoke test" in text


def test_holm_corrects_over_the_pipelines_of_a_regime() -> None:
    # Two pipelines with the same 8/1 split: p = 0.039 each alone, 0.078 after Holm's correction over two.
    samples = samples_for(8, 1, 30)
    samples += [Sample.of({**s.to_json(), "strategy": "recite"}) for s in samples if s.strategy == "reorder"]
    rows = results(samples, RunInfo("m", "p", ("none", "reorder", "recite"), 0, "full"))["lift"]
    assert [(r["p"], r["p_holm"], r["family"]) for r in rows] == [(0.0390625, 0.078125, 2)] * 2
