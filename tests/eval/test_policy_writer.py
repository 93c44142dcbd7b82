"""`contextlift policy` on the committed reference reports: one rule per prompt shape, the best pipeline whose
interval excludes zero within the cost ceiling, its evidence copied from results.json, and a file the proxy loads
with the real registry and caps."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from eval.policy_writer import CostCeiling, write_policy
from proxy.cli import main
from proxy.policy import RequestFeatures, load_policy
from strategies import build_registry, parse_selection

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
ORDERS, STUFF = RESULTS / "reference-2-orders", RESULTS / "reference-langchain-stuff"


def rules(text: str) -> list[dict[str, object]]:
    return list(tomllib.loads(text)["rule"])


def test_without_a_ceiling_the_best_lift_wins() -> None:
    (rule,) = rules(write_policy([ORDERS], CostCeiling()))
    # recite +0.122 [+0.033, +0.211] beats promote +0.111 [+0.044, +0.189] on the mean.
    assert rule["strategy"] == "recite"
    assert rule["formats"] == ["litm"]
    assert rule["documents"] == [2, 10]
    evidence = rule["evidence"]
    assert isinstance(evidence, dict)
    assert (evidence["lift"], evidence["ci95"], evidence["n"]) == (0.1222, [0.0333, 0.2111], 90)


def test_a_ceiling_of_one_call_keeps_the_cheap_pipeline() -> None:
    (rule,) = rules(write_policy([ORDERS], CostCeiling.parse("calls=1")))
    assert rule["strategy"] == "reorder; order=promote"


def test_each_prompt_shape_gets_its_own_rule() -> None:
    written = rules(write_policy([ORDERS, STUFF], CostCeiling.parse("calls=1")))
    assert [(r["formats"], r["model"]) for r in written] == [
        (["litm"], "smollm2-135m-instruct*"),
        (["paragraphs"], "smollm2-135m-instruct*"),
    ]
    assert len({r["id"] for r in written}) == 2


def test_nothing_significant_writes_no_rule_and_says_why(tmp_path: Path) -> None:
    text = write_policy([ORDERS], CostCeiling.parse("latency=0.5"))
    assert "rule" not in tomllib.loads(text)
    assert "no pipeline's lift excludes zero" in text


def test_the_written_policy_loads_in_the_proxy_and_chooses(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(write_policy([ORDERS, STUFF], CostCeiling.parse("calls=1")))
    registry = build_registry()
    policy = load_policy(path, lambda text, param: registry.resolve(parse_selection(text), {}))
    features = RequestFeatures("smollm2-135m-instruct", 10, 800, "paragraphs", False)
    assert policy.choose(features).rule == "smollm2-135m-instruct-litm-qa-paragraphs"
    assert policy.choose(RequestFeatures("smollm2-135m-instruct", 30, 800, "litm", False)).rule == "none"


@pytest.mark.parametrize("ceiling", ["calls", "latency=-1", "tokens=2", "calls=x"])
def test_a_bad_ceiling_is_refused(ceiling: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", str(ORDERS), "--max-cost", ceiling]) == 2
    assert "--max-cost" in capsys.readouterr().err


def test_the_example_prints_and_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "--example"]) == 0
    path = tmp_path / "example.toml"
    path.write_text(capsys.readouterr().out)
    registry = build_registry()
    assert len(load_policy(path, lambda text, param: registry.resolve(parse_selection(text), {})).rules) == 2
