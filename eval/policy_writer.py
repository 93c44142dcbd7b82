"""A policy for `auto`, written from eval reports and shadow reports: per model and prompt shape, the pipeline
with the best measured lift that holds in some regime and is significantly below `none` in none, by the report's
own rule (eval.verdicts.best_pipeline: exact paired test, at least MIN_DISCORDANT pairs that differ, Holm's correction
over the regime's pipelines), within the operator's cost ceiling; no rule (so `none`) where nothing qualifies, with a
comment saying why. A smoke-test report (the quick profile) yields no rule. A shadow-report folder (its
`probes.json`: positional probes on live traffic) yields rules per model and detected format by the same rule,
each with the probe run as its evidence.

The file is written as text rather than through a TOML writer: its comments, which carry the reasoning next to
each rule, are the point, and TOML writers drop comments. It is read back through the proxy's own schema before
it is returned, so what is written always loads.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval.report.probes import PROBES_FILE
from eval.verdicts.best_pipeline import SMOKE_PROFILES, harmful, significant
from eval.verdicts.stats import ALPHA, MIN_DISCORDANT

SHAPE_FORMATS = {
    "paper": "litm",
    "langchain-stuff": "paragraphs",
    "langchain-retrievalqa": "paragraphs",
    "llamaindex": "metadata-blocks",
    "dspy": "numbered",
}
"""The shape detection reports (`X-Context-Format`, first word) for each prompt shape the eval renders in
(tests/eval/tasks/test_prompt_shapes_are_detected.py pins these)."""
POSITIONED_TASKS = ("litm-qa",)
"""Tasks whose prompt shape maps to a detected format (SHAPE_FORMATS is litm-qa's), so a rule can tell their
requests apart in live traffic."""


@dataclass(frozen=True, slots=True)
class CostCeiling:
    """The most a rule's pipeline may cost relative to `none`: upstream calls, and median latency."""

    calls: float | None = None
    latency: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> CostCeiling:
        """`calls=2,latency=1.5` (either may be left out).

        Raises:
            ValueError: an unknown key or a value that is not a positive number.
        """
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in (text or "").split(","))):
            key, _, value = part.partition("=")
            if key not in ("calls", "latency"):
                raise ValueError(f"--max-cost {text!r}: keys are calls and latency, e.g. calls=2,latency=1.5")
            try:
                values[key] = float(value)
            except ValueError:
                raise ValueError(f"--max-cost {text!r}: {key} must be a number") from None
            if values[key] <= 0:
                raise ValueError(f"--max-cost {text!r}: {key} must be positive")
        return cls(**values)

    def allows(self, cost: dict[str, Any] | None) -> bool:
        if cost is None:
            return self.calls is None and self.latency is None
        if self.calls is not None and float(cost.get("calls_vs_none", 1.0)) > self.calls:
            return False
        return self.latency is None or float(cost.get("p50_s_vs_none", 1.0)) <= self.latency


def write_policy(reports: list[Path], ceiling: CostCeiling) -> str:
    """The policy's text for the reports (folders holding results.json and run.json).

    Raises:
        ValueError: a folder without results, or a policy that would not load (a bug, not the user's).
        OSError: a file cannot be read.
    """
    lines = [
        "# contextlift policy, written by `contextlift policy` from: " + ", ".join(str(r) for r in reports),
        f"# cost ceiling relative to none: calls {ceiling.calls or 'any'}, median latency {ceiling.latency or 'any'}",
        "version = 1",
        f"description = {json.dumps('from ' + ', '.join(r.name for r in reports))}",
    ]
    ids: set[str] = set()
    for report in reports:
        if (report / PROBES_FILE).exists() and not (report / "results.json").exists():
            try:
                lines += _probe_rules(report, json.loads((report / PROBES_FILE).read_text()), ceiling, ids)
            except (KeyError, TypeError, AttributeError, IndexError) as error:  # a hand-edited or torn file
                raise ValueError(f"{report / PROBES_FILE}: not a shadow report's probes file ({error!r:.80})") from None
            continue
        results = json.loads((report / "results.json").read_text())
        run = json.loads((report / "run.json").read_text())
        lines += _rules(report, results, run, ceiling, ids)
    text = "\n".join(lines) + "\n"
    from proxy.policy import PolicyFile  # the proxy's own schema: what is written must load

    PolicyFile.model_validate(tomllib.loads(text))
    return text


def _rules(
    report: Path, results: dict[str, Any], run: dict[str, Any], ceiling: CostCeiling, ids: set[str]
) -> list[str]:
    model = str(run.get("model") or "*")
    if str(run.get("profile", "")) in SMOKE_PROFILES:
        return [
            "",
            f"# {report.name}: a smoke test (profile {run['profile']}, too few cases per cell to act on), so no rule",
            "# comes from it. Run the eval with --profile full for evidence.",
        ]
    # run.json has no date of its own: the results' file time is when the report was written.
    date = datetime.fromtimestamp((report / "results.json").stat().st_mtime, UTC).date().isoformat()
    costs = {(c["task"], c["strategy"]): c for c in results.get("cost", [])}
    sizes: dict[str, int] = defaultdict(int)
    for row in results.get("accuracy", []):
        sizes[row["task"]] = max(sizes[row["task"]], int(row["size"] or 0))
    lifts: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in results.get("lift", []):
        if row["size"] is None and row["task"] in POSITIONED_TASKS:
            lifts[row["task"]][row["strategy"]].append(row)
    out: list[str] = []
    for task, by_strategy in sorted(lifts.items()):
        shape = str(run.get("tasks", {}).get(task, {}).get("prompt", "paper"))
        fmt = SHAPE_FORMATS.get(shape)
        if fmt is None:
            continue
        qualified = [
            (
                sum(r["value"] for r in rows) / len(rows),
                strategy,
                min((r for r in rows if significant(r)), key=lambda r: (r.get("p_holm", 1.0), -r["value"])),
            )
            for strategy, rows in by_strategy.items()
            if any(significant(r) for r in rows)
            and not any(harmful(r) for r in rows)
            and ceiling.allows(costs.get((task, strategy)))
        ]
        out.append("")
        if not qualified:
            out += _no_rule(task, shape, fmt, model, by_strategy)
            continue
        mean, strategy, row = max(qualified, key=lambda q: (q[0], q[2]["ci95"][0]))
        rule_id = _unique(f"{model}-{task}-{fmt}", ids)
        evidence_id = f"{report.name}#{task}/{row['variant']}/{strategy}"
        cost = costs.get((task, strategy), {})
        out += [
            f"# {task} ({shape} prompts, detected as {fmt}): best of {len(qualified)} qualifying pipeline(s); mean "
            f"lift over regimes {mean:+.3f}; calls x{float(cost.get('calls_vs_none', 1)):.2f}, median latency "
            f"x{float(cost.get('p50_s_vs_none', 1)):.2f}",
            "[[rule]]",
            f"id = {json.dumps(rule_id)}",
            f"model = {json.dumps(model + '*' if model != '*' else '*')}",
            f"documents = [2, {max(2, sizes[task])}]",
            f"formats = [{json.dumps(fmt)}]",
            f"strategy = {json.dumps(strategy)}",
            _evidence(evidence_id, row, report, date),
        ]
    return out


def _probe_rules(report: Path, data: dict[str, Any], ceiling: CostCeiling, ids: set[str]) -> list[str]:
    """Rules from a shadow report's positional probes: per model and format, the pipeline with the highest lift
    over `none` that holds, within the cost ceiling; a comment where none does."""
    if data.get("kind") != "contextlift-shadow-probes":
        raise ValueError(f"{report / PROBES_FILE}: not a shadow report's probes file")
    out: list[str] = []
    for group in data.get("groups", []):
        model, fmt = str(group["model"]), str(group["format"])
        where = f"{model or '(no model)'} / {fmt}: {group['probes']} probes from live traffic"
        qualified = [r for r in group["lift"] if significant(r) and ceiling.allows(r.get("cost"))]
        out.append("")
        if not qualified:
            out += [
                f"# {where}: no rule. No pipeline's lift over none holds (above zero, at least {MIN_DISCORDANT}",
                f"# pairs that differ, Holm-corrected exact p below {ALPHA}) within the cost ceiling.",
                *_closest(group["lift"]),
            ]
            continue
        row = max(qualified, key=lambda r: (r["value"], r["ci95"][0]))
        glob = _literal_glob(model) if model else "*"
        date = str(group["last"])[:10] or "unknown"
        out += [
            f"# {where}; best of {len(qualified)} qualifying pipeline(s); calls x{row['cost']['calls_vs_none']:.2f}",
            "[[rule]]",
            f"id = {json.dumps(_unique('probe-' + (model or 'any') + '-' + fmt, ids))}",
            f"model = {json.dumps(glob)}",
            f"documents = [{int(group['documents'][0])}, {int(group['documents'][1])}]",
            f"formats = [{json.dumps(fmt)}]",
            f"strategy = {json.dumps(row['strategy'])}",
            _evidence(_printable(f"{report.name}#probes/{model}/{fmt}/{row['strategy']}"), row, report, date),
        ]
    return out


def _evidence(evidence_id: str, row: dict[str, Any], report: Path, date: str) -> str:
    """A rule's `evidence` line, from a lift row (an eval report's or a probe group's)."""
    fields = [
        f"id = {json.dumps(evidence_id)}",
        f"lift = {row['value']:.4f}",
        f"ci95 = [{row['ci95'][0]:.4f}, {row['ci95'][1]:.4f}]",
        f"n = {int(row['n'])}",
        f"test = {json.dumps(row.get('test', 'mcnemar-exact'))}",
        f"p = {float(row.get('p_holm', row.get('p', 1.0))):.3g}",
        f"correction = {json.dumps('holm/' + str(int(row.get('family', 1))))}",
        f"report = {json.dumps(str(report))}",
        f"date = {json.dumps(date)}",
    ]
    return "evidence = { " + ", ".join(fields) + " }"


def _closest(rows: list[dict[str, Any]]) -> list[str]:
    """The comment line naming the candidate closest to holding, if any."""
    closest = min(rows, key=lambda r: (r.get("p_holm", 1.0), -r["value"]), default=None)
    if closest is None:
        return []
    return [
        f"# Closest: {closest['strategy']}{' (' + closest['variant'] + ')' if closest.get('variant') else ''} lift "
        f"{closest['value']:+.3f}, wins/losses {closest.get('wins', '-')}/{closest.get('losses', '-')}, "
        f"p (Holm) {float(closest.get('p_holm', closest.get('p', 1.0))):.2g}, n {closest['n']}."
    ]


def _literal_glob(model: str) -> str:
    """A glob matching exactly `model` (fnmatch's special characters each in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in model)[:200]


def _printable(text: str) -> str:
    """Printable ASCII (an evidence id is sent in a header), at most 200 characters."""
    return "".join(c if " " <= c <= "~" else "?" for c in text)[:200]


def _no_rule(task: str, shape: str, fmt: str, model: str, by_strategy: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The comment left where a rule would go: why no pipeline qualified, with the closest candidate's figures."""
    rows = [r for rows in by_strategy.values() for r in rows]
    return [
        f"# {task} ({shape} prompts, detected as {fmt}) on {model}: no rule. No pipeline's lift holds (above zero,",
        f"# at least {MIN_DISCORDANT} pairs that differ, Holm-corrected exact p below {ALPHA}) without a significant",
        "# loss in another regime, within the cost ceiling, so auto applies none to these requests.",
        *_closest(rows),
    ]


def _unique(name: str, ids: set[str]) -> str:
    base = "".join(c if c.isalnum() or c in "._:-" else "-" for c in name)[:60].strip("-") or "rule"
    candidate, number = base, 2
    while candidate in ids:
        candidate, number = f"{base}-{number}", number + 1
    ids.add(candidate)
    return candidate
