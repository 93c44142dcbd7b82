"""`contextlift policy` writes only the rules it means, whatever the reports hold: a model name a client sent
(through a shadow sink into probes.json) with line breaks and a TOML rule in it stays inside its string and its
comment. The file is replaced whole (a new file renamed over the old one), and the proxy refuses a policy file
holding no setting, which is what a reader sees of a file mid-write. Malformed input ends in one line and exit 2,
never a traceback."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from contextlift.eval.policy_writer import CostCeiling, write_policy
from contextlift.proxy.cli import main
from contextlift.proxy.policy import PolicyError, load_policy
from contextlift.strategies import build_registry, parse_selection

INJECTED = (
    'm\n[[rule]]\nid = "evil"\nstrategy = "medoid; k=9"\n'
    'evidence = { id = "x", lift = 1.0, ci95 = [1.0, 1.0], n = 1, report = "x", date = "x" }\n#'
)
ROW = {"strategy": "reorder", "value": 0.2, "ci95": [0.1, 0.3], "n": 60, "wins": 14, "losses": 2, "p_holm": 0.004,
       "family": 2, "cost": {"calls_vs_none": 1.0}}  # fmt: skip


def probes_report(folder: Path, model: str, fmt: str = "litm", rows: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    group = {"model": model, "format": fmt, "probes": 60, "documents": [3, 10], "last": "2026-01-02T00:00:00",
             "lift": [ROW] if rows is None else rows}  # fmt: skip
    (folder / "probes.json").write_text(json.dumps({"kind": "contextlift-shadow-probes", "groups": [group]}))
    return folder


def resolve(text: str, param: str) -> Any:
    return build_registry().resolve(parse_selection(text), {})


@pytest.mark.parametrize(
    ("model", "fmt"),
    [
        (INJECTED, "litm"),
        ("m\r\n[[rule]]\r\n", "litm"),
        ("m\u2028x\x7fy\x00z", "litm"),
    ],
    ids=["newline-rule", "crlf", "odd-controls"],
)
def test_what_a_client_sent_never_becomes_a_rule(tmp_path: Path, model: str, fmt: str) -> None:
    text = write_policy([probes_report(tmp_path / "shadow", model, fmt)], CostCeiling.parse("calls=1"))
    (rule,) = tomllib.loads(text)["rule"]
    assert rule["id"] != "evil"
    assert rule["strategy"] == "reorder"
    assert rule["formats"] == [fmt]
    assert all(line.startswith(("#", "[[rule]]", "version", "description", "id", "model", "documents", "formats",
                                "strategy", "evidence")) or not line for line in text.split("\n"))  # fmt: skip
    path = tmp_path / "policy.toml"
    path.write_text(text)
    assert [r.id for r, _ in load_policy(path, resolve).rules] == [rule["id"]]


def test_a_format_no_request_can_have_writes_no_rule_and_a_comment_without_a_line_break(tmp_path: Path) -> None:
    fmt = 'litm"]\n[[rule]]\nid = "evil"\n#'
    text = write_policy([probes_report(tmp_path / "shadow", "m", fmt)], CostCeiling.parse("calls=1"))
    assert "rule" not in tomllib.loads(text)
    assert "\n[[rule]]" not in text
    assert "no rule. No request is detected in that format" in text


def test_a_comment_line_holds_no_line_break(tmp_path: Path) -> None:
    rows = [{**ROW, "p_holm": 0.5, "strategy": 'x\n[[rule]]\nid = "evil"'}]  # nothing holds: a comment names it
    text = write_policy([probes_report(tmp_path / "shadow", INJECTED, rows=rows)], CostCeiling())
    assert "rule" not in tomllib.loads(text)
    assert "\n[[rule]]" not in text


def test_the_policy_replaces_the_file_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = probes_report(tmp_path / "shadow", "m")
    out = tmp_path / "policy.toml"
    out.write_text("version = 1\n")
    out.chmod(0o640)
    before = out.stat()
    assert main(["policy", str(report), "--out", str(out)]) == 0
    after = out.stat()
    assert after.st_ino != before.st_ino  # a new file renamed over the old one: never empty to a reader
    assert after.st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.toml", "shadow"]  # no partial file left
    assert "rule" in tomllib.loads(out.read_text())


def test_out_naming_a_folder_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = probes_report(tmp_path / "shadow", "m")
    assert main(["policy", str(report), "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "is a folder" in error


def test_a_probes_file_nested_too_deep_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "probes.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["policy", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "nested too deep" in error


@pytest.mark.parametrize("text", ["", "\n  \n", "# only a comment, as a torn write leaves it\n"])
def test_the_proxy_refuses_a_policy_holding_no_setting(tmp_path: Path, text: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError, match="holds no setting"):
        load_policy(path, resolve)


def test_a_policy_of_no_rules_says_version_1(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("# deliberately empty: auto applies none\nversion = 1\n")
    assert load_policy(path, resolve).rules == ()


@pytest.mark.parametrize(
    "content",
    ['{"data": 5}', "[" * 200_000 + "]" * 200_000, '{"data": [{"title": "t", "paragraphs": [{"context": 1}]}]}', "{"],
    ids=["data-a-number", "nested-deep", "wrong-shape", "not-json"],
)
def test_eval_rankers_reports_a_malformed_squad_file_in_one_line(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "squad-v2.0-dev.json").write_text(content)
    argv = ["eval-rankers", "--out", str(tmp_path / "out"), "--regimes", "squad", "--data", str(tmp_path),
            "--rankers", "client", "--sizes", "10", "--samples", "1"]  # fmt: skip
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "squad-v2.0-dev.json" in error


def test_the_closest_candidate_named_is_one_that_gained_never_a_significant_loss(tmp_path: Path) -> None:
    loss = {**ROW, "strategy": "filter, reorder", "value": -0.3, "wins": 0, "losses": 9, "p_holm": 0.008}
    gain = {**ROW, "strategy": "reorder", "value": 0.2, "wins": 6, "losses": 0, "p_holm": 0.06}
    text = write_policy([probes_report(tmp_path / "r", "m", rows=[loss, gain])], CostCeiling())
    assert "# Closest: reorder lift +0.200, wins/losses 6/0" in text
    assert "filter, reorder" not in text


def test_where_every_candidate_lost_the_comment_says_so(tmp_path: Path) -> None:
    rows = [{**ROW, "strategy": "medoid; k=3", "value": -0.3, "p_holm": 0.008}, {**ROW, "value": -0.05, "p_holm": 0.9}]
    text = write_policy([probes_report(tmp_path / "r", "m", rows=rows)], CostCeiling())
    assert "# No pipeline gained over none; the smallest loss: reorder lift -0.050" in text
