"""A policy for `auto`, written from eval reports and shadow reports: per model and prompt shape, the pipeline
with the best measured lift that holds in some regime and is significantly below `none` in none, by the report's
own rule (eval.verdicts.best_pipeline: exact paired test, at least MIN_DISCORDANT pairs that differ, Holm's correction
over the regime's pipelines, an interval clear of the run's noise floor), within the operator's cost ceiling; no
rule (so `none`) where nothing qualifies, with a comment saying why. A smoke-test report (the quick profile) yields
no rule. A shadow-report folder (its `probes.json`: positional probes on live traffic) yields rules per model and
detected format by the same rule, each with the probe run as its evidence.

The file is written as text rather than through a TOML writer: its comments, which carry the reasoning next to
each rule, are the point, and TOML writers drop comments. Much of what it holds came from clients (a model name in
a shadow sink is whatever a request said): every string is escaped as TOML, every comment is one line of
printable text, and the text is read back before it is returned, through the proxy's own schema and compared with
the rules meant, so what is written loads and says exactly that.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import secrets
import tomllib
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contextlift.eval.report.probes import PROBES_FILE, probe_groups
from contextlift.eval.sinks import Source, read_sinks, source_name
from contextlift.eval.verdicts.best_pipeline import SMOKE_PROFILES, harmful, significant
from contextlift.eval.verdicts.stats import ALPHA, MIN_DISCORDANT, pairs_to_decide
from contextlift.strategies import build_registry
from contextlift.strategies.probes import FINDABLE_KINDS, RANKER_KIND

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

Entry = str | dict[str, Any]
"""A line of the policy as the writer plans it: a comment's text ("" for a blank line), or a rule."""


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


@dataclass(frozen=True, slots=True)
class Judged:
    """What a report said of one model and detected format: the pipelines that lost there, and whether a rule was
    written for it. A rule kept from before that this contradicts is dropped."""

    model: str
    format: str
    harmful: frozenset[str]
    ruled: bool

    def contradicts(self, rule: dict[str, Any]) -> bool:
        """Whether this judgement covers the rule's requests and either writes a rule of its own for them or finds
        the rule's pipeline losing there."""
        covers = fnmatch.fnmatchcase(self.model, str(rule.get("model", "*"))) and self.format in rule.get(
            "formats", [self.format]
        )
        return covers and (self.ruled or str(rule.get("strategy")) in self.harmful)


def write_policy(
    reports: Sequence[Source],
    ceiling: CostCeiling,
    kept: tuple[str, list[dict[str, Any]]] | None = None,
    store_prefix: str | None = None,
) -> str:
    """The policy's text for the reports (folders holding results.json and run.json, or a shadow report's
    probes.json), or a shadow store's URL, whose stream's probes are grouped as shadow-report would. `kept`: the
    policy in force
    (its name and its rules), whose rules stay where the reports do not contradict them (`Judged.contradicts`): a
    run too small to decide anything leaves what was measured before in place.

    Raises:
        ValueError: a folder without results, or a policy that would not load (a bug, not the user's).
        OSError: a file cannot be read.
    """
    description = _writable("from " + ", ".join(source_name(r) for r in reports))
    named = [str(r) if isinstance(r, Path) else source_name(r) for r in reports]  # a store without its password
    lines = [
        _comment("contextlift policy, written by `contextlift policy` from: " + ", ".join(named)),
        _comment(
            f"cost ceiling relative to none: calls {ceiling.calls or 'any'}, median latency {ceiling.latency or 'any'}"
        ),
        "version = 1",
        f"description = {_toml(description)}",
    ]
    entries: list[Entry] = []
    ids: set[str] = set()
    judged: list[Judged] = []
    for report in reports:
        if isinstance(report, str):  # a store's stream: its records' probes, grouped as the report groups them
            groups = probe_groups(read_sinks([report], whole=False, prefix=store_prefix).records)
            probes = {"kind": "contextlift-shadow-probes", "groups": groups}
            entries += _probe_rules(source_name(report), probes, ceiling, ids, judged)
            continue
        if (report / PROBES_FILE).exists() and not (report / "results.json").exists():
            probes = _read_json(report / PROBES_FILE)
            try:
                entries += _probe_rules(report, probes, ceiling, ids, judged)
            except (KeyError, TypeError, AttributeError, IndexError) as error:  # a hand-edited or torn file
                raise ValueError(f"{report / PROBES_FILE}: not a shadow report's probes file ({error!r:.80})") from None
            continue
        results = _read_json(report / "results.json")
        run = _read_json(report / "run.json")
        entries += _rules(report, results, run, ceiling, ids, judged)
    if kept is not None:
        entries += _kept(kept, judged, ids)
    rules = []
    for entry in entries:
        if isinstance(entry, dict):
            rules.append(entry)
            lines += ["[[rule]]", *(f"{key} = {_toml(value)}" for key, value in entry.items())]
        else:
            lines.append(_comment(entry) if entry else "")
    text = "\n".join(lines) + "\n"
    _check_reads_back(text, {"version": 1, "description": description, **({"rule": rules} if rules else {})})
    return text


def write_policy_file(path: Path, text: str) -> None:
    """Write the policy at `path` whole or not at all: into a new file beside it, then renamed over it. The proxy
    polls the file, and a file rewritten in place is empty, then partial, to whoever reads it meanwhile. The new
    file takes the old one's permissions (the proxy may read it as another user), else the umask's.

    Raises:
        OSError: the folder cannot be written, or `path` is a folder.
    """
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; --out names the policy file")
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with open(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if path.exists():
            os.chmod(partial, path.stat().st_mode & 0o7777)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _check_reads_back(text: str, meant: dict[str, Any]) -> None:
    """Read the text back as the proxy will, and compare it with what was meant: a string that escaped its quotes,
    or a comment that ran into a new line, changes what is parsed.

    Raises:
        ValueError: the text does not parse to `meant`, or does not load in the proxy.
    """
    from pydantic import ValidationError

    from contextlift.proxy.policy import PolicyFile  # the proxy's own schema: what is written must load

    parsed = tomllib.loads(text)
    if parsed != meant:
        raise ValueError("the policy written does not read back as the rules meant (a bug): not written")
    try:
        PolicyFile.model_validate(parsed)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ValueError(
            f"the policy would not load ({error.error_count()} problem(s); {where}: {problem['msg']})"
        ) from None


def _read_json(path: Path) -> Any:
    """A report's JSON file.

    Raises:
        ValueError: not JSON, or nested past the parser's recursion limit.
        OSError: the file cannot be read.
    """
    try:
        return json.loads(path.read_bytes())
    except RecursionError:
        raise ValueError(f"{path}: nested too deep to be a report") from None
    except ValueError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None


def _rules(
    report: Path,
    results: dict[str, Any],
    run: dict[str, Any],
    ceiling: CostCeiling,
    ids: set[str],
    judged: list[Judged],
) -> list[Entry]:
    model = str(run.get("model") or "*")
    if str(run.get("profile", "")) in SMOKE_PROFILES:
        return [
            "",
            f"{report.name}: a smoke test (profile {run['profile']}, too few cases per cell to act on), so no rule",
            "comes from it. Run the eval with --profile full for evidence.",
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
    out: list[Entry] = []
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
        losing = frozenset(strategy for strategy, rows in by_strategy.items() if any(harmful(r) for r in rows))
        judged.append(Judged(model, fmt, losing, bool(qualified)))
        if not qualified:
            out += _no_rule(task, shape, fmt, model, by_strategy)
            continue
        mean, strategy, row = max(qualified, key=lambda q: (q[0], q[2]["ci95"][0]))
        rule_id = _unique(f"{model}-{task}-{fmt}", ids)
        evidence_id = f"{report.name}#{task}/{row['variant']}/{strategy}"
        cost = costs.get((task, strategy), {})
        out += [
            f"{task} ({shape} prompts, detected as {fmt}): best of {len(qualified)} qualifying pipeline(s); mean "
            f"lift over regimes {mean:+.3f}; calls x{float(cost.get('calls_vs_none', 1)):.2f}, median latency "
            f"x{float(cost.get('p50_s_vs_none', 1)):.2f}",
            {
                "id": rule_id,
                "model": model + "*" if model != "*" else "*",
                "documents": [2, max(2, sizes[task])],
                "formats": [fmt],
                "strategy": strategy,
                "evidence": _evidence(evidence_id, row, report, date),
            },
        ]
    return out


def _probe_rules(
    report: Path | str, data: dict[str, Any], ceiling: CostCeiling, ids: set[str], judged: list[Judged]
) -> list[Entry]:
    """Rules from a shadow report's positional probes (`report`: its folder, or the store they were read from): per
    model and format, the pipeline with the highest lift over `none` that holds, within the cost ceiling; a comment
    where none does."""
    name = report.name if isinstance(report, Path) else report
    if data.get("kind") != "contextlift-shadow-probes":
        file = report / PROBES_FILE if isinstance(report, Path) else report
        raise ValueError(f"{file}: not a shadow report's probes file")
    from contextlift.proxy.policy import FORMATS  # what a rule's `formats` may name, as the proxy loads it

    out: list[Entry] = []
    for group in data.get("groups", []):
        model, fmt = str(group["model"]), str(group["format"])
        where = f"{model or '(no model)'} / {fmt}: {group['probes']} probes from live traffic"
        if fmt not in FORMATS:
            out += ["", f"{where}: no rule. No request is detected in that format (a report written by hand?)."]
            continue
        rows, notes = _probe_lifts(group)
        qualified = [r for r in rows if significant(r) and ceiling.allows(r.get("cost"))]
        losing = {str(r["strategy"]) for r in rows if harmful(r)} | _lost_unfound(group)
        judged.append(Judged(model, fmt, frozenset(losing), bool(qualified)))
        out.append("")
        if not qualified:
            out += [
                f"{where}: no rule. No pipeline's lift over none holds (above zero, at least {MIN_DISCORDANT}",
                f"pairs that differ, Holm-corrected exact p below {ALPHA}) within the cost ceiling.",
                *notes,
                *_closest(rows),
            ]
            continue
        row = max(qualified, key=lambda r: (r["value"], r["ci95"][0]))
        date = str(group["last"])[:10] or "unknown"
        low, high = int(group["documents"][0]), int(group["documents"][1])
        kind = row.get("kind")
        out += [
            f"{where}; best of {len(qualified)} qualifying pipeline(s); calls x{row['cost']['calls_vs_none']:.2f}",
            *notes,
            f"documents [{low}, {high}]: the document counts the probes were built from; a request with more or fewer",
            "is not matched (X-Context-Policy names the condition it failed). Widen it here to apply the rule there.",
            {
                "id": _unique("probe-" + (model or "any") + "-" + fmt, ids),
                "model": _literal_glob(model) if model else "*",
                "documents": [low, high],
                "formats": [fmt],
                "strategy": str(row["strategy"]),
                "evidence": _evidence(
                    _printable(f"{name}#probes/{model}/{fmt}{'/' + kind if kind else ''}/{row['strategy']}"),
                    row,
                    report,
                    date,
                ),
            },
        ]
    return out


def _probe_lifts(group: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The lift each pipeline is judged by. A pipeline that ranks documents: its lift on the probes a ranker can
    find (`FINDABLE_KINDS`, pooled), where it must hold, and it must not lose significantly on the `nolima` probes
    (`RANKER_KIND`), where the ranker cannot find the needle; the others by their lift on every probe. With comment
    lines saying which probes judged each ranked pipeline."""
    findable = group.get("findable")
    by_kind = group.get("by_kind", {})
    if findable is None and RANKER_KIND not in by_kind:
        return list(group["lift"]), []  # a report from before the kinds were kept: every probe judges every pipeline
    found = {r["strategy"]: r for r in (findable or {}).get("lift", [])}
    hidden = {r["strategy"]: r for r in by_kind.get(RANKER_KIND, {}).get("lift", [])}
    counts = f"{(findable or {}).get('probes', 0)} {'+'.join(FINDABLE_KINDS)} probes"
    hard = f"{by_kind.get(RANKER_KIND, {}).get('probes', 0)} {RANKER_KIND} probes"
    rows, notes = [], []
    for row in group["lift"]:
        label = str(row["strategy"])
        if not ranks_documents(label):
            rows.append(row)
            continue
        on_found, on_hidden = found.get(label), hidden.get(label)
        if on_found is None:
            notes.append(f"{label}: no {'/'.join(FINDABLE_KINDS)} probe, where a ranker finds the needle: not judged.")
            continue
        if on_hidden is not None and harmful(on_hidden):
            notes += [
                f"{label}: its lift on the {counts} is {_figures(on_found)}, but it loses on the {hard}",
                f"where its ranker cannot find the needle ({_figures(on_hidden)}): no rule from it.",
            ]
            continue
        checked = (
            f"no significant loss on the {hard} ({_figures(on_hidden)})" if on_hidden else f"no {RANKER_KIND} probe"
        )
        rows.append({**on_found, "kind": "+".join(FINDABLE_KINDS)})
        notes.append(f"{label}: judged on the {counts} where its ranker can find the needle; {checked}.")
    return rows, notes


def _lost_unfound(group: dict[str, Any]) -> set[str]:
    """The ranked pipelines that lost significantly on the probes their ranker cannot find the needle in."""
    hidden = group.get("by_kind", {}).get(RANKER_KIND, {}).get("lift", [])
    return {str(r["strategy"]) for r in hidden if ranks_documents(str(r["strategy"])) and harmful(r)}


def ranks_documents(label: str) -> bool:
    """Whether a pipeline (`filter, reorder; ranker=minilm`) has a step that ranks documents (`Strategy.ranks`)."""
    registry = build_registry()
    names = {step.split(";", 1)[0].strip() for step in label.split(",")}
    return any(name in registry.names() and registry.get(name).ranks for name in names)


def _evidence(evidence_id: str, row: dict[str, Any], report: Path | str, date: str) -> dict[str, Any]:
    """A rule's `evidence`, from a lift row (an eval report's or a probe group's), its figures rounded as written."""
    return {
        "id": evidence_id,
        "lift": round(float(row["value"]), 4),
        "ci95": [round(float(row["ci95"][0]), 4), round(float(row["ci95"][1]), 4)],
        "n": int(row["n"]),
        "test": str(row.get("test", "mcnemar-exact")),
        "p": float(f"{float(row.get('p_holm', row.get('p', 1.0))):.3g}"),
        "correction": "holm/" + str(int(row.get("family", 1))),
        "report": _writable(str(report)),
        "date": date,
    }


def _closest(rows: list[dict[str, Any]]) -> list[Entry]:
    """The comment line naming the candidate closest to holding: among those that gained over `none`, the one with
    the lowest p. A pipeline that lost is never named closest, however small its p (a significant loss is the
    furthest from a rule); where none gained, the comment says so and names the smallest loss."""
    gained = [r for r in rows if float(r["value"]) > 0]
    if gained:
        closest = min(gained, key=lambda r: (r.get("p_holm", 1.0), -r["value"]))
        return ["Closest: " + _figures(closest) + _to_decide(closest) + "."]
    if not rows:
        return []
    nearest = max(rows, key=lambda r: r["value"])
    said = "the smallest loss" if float(nearest["value"]) < 0 else "the nearest, no change"
    return [f"No pipeline gained over none; {said}: " + _figures(nearest) + "."]


def _figures(row: dict[str, Any]) -> str:
    variant = f" ({row['variant']})" if row.get("variant") else ""
    return (
        f"{row['strategy']}{variant} lift {row['value']:+.3f}, wins/losses {row.get('wins', '-')}/"
        f"{row.get('losses', '-')}, p (Holm) {float(row.get('p_holm', row.get('p', 1.0))):.2g}, n {row['n']}"
    )


def _to_decide(row: dict[str, Any]) -> str:
    """`; about 75 pairs would decide it`: the pairs a run needs for a lift of this size, with as many pairs
    differing, to hold (eval.verdicts.stats.pairs_to_decide); "" where the row says too little to tell."""
    n = int(row.get("n") or 0)
    differ = (int(row.get("wins") or 0) + int(row.get("losses") or 0)) / n if n else 0.0
    needed = pairs_to_decide(float(row["value"]), differ, int(row.get("family", 1)))
    return "" if needed is None else f"; about {needed} pairs would decide it (this run: {n})"


def _literal_glob(model: str) -> str:
    """A glob matching exactly `model` (fnmatch's special characters each in brackets); a lone surrogate, which
    UTF-8 cannot write, is `?`, which matches it."""
    return "".join(f"[{c}]" if c in "*?[" else "?" if _surrogate(c) else c for c in model)[:200]


def _writable(text: str) -> str:
    """A file name as a policy can hold it: a byte the file system gave that is not UTF-8 (a lone surrogate in
    Python's text of the name) becomes `?`."""
    return "".join("?" if _surrogate(c) else c for c in text)


def _surrogate(character: str) -> bool:
    return "\ud800" <= character <= "\udfff"


def _comment(text: str) -> str:
    """One comment line holding `text`: a line break (any of TOML's, or one an editor shows as such), another
    control character or a lone surrogate becomes `?`, so nothing in it can start a line of TOML."""
    visible = "".join("?" if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") else c for c in text)
    return f"# {visible}"


def _toml(value: Any) -> str:
    """A TOML value: strings escaped as basic strings (quotes, backslashes, every control character), numbers
    as Python writes them, lists and tables inline.

    Raises:
        ValueError: a number that is not finite, or a type TOML has no literal for here.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a policy holds finite numbers only, not {value}")
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_escaped(c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml(v)}" for key, v in value.items()) + " }"
    raise ValueError(f"no TOML literal for {type(value).__name__}")


def _escaped(character: str) -> str:
    if character in '"\\':
        return "\\" + character
    if character < " " or character == "\x7f":
        return f"\\u{ord(character):04x}"
    if _surrogate(character):
        raise ValueError("a lone surrogate (a name that is not Unicode text) cannot be written in a policy")
    return character


def _printable(text: str) -> str:
    """Printable ASCII (an evidence id is sent in a header), at most 200 characters."""
    return "".join(c if " " <= c <= "~" else "?" for c in text)[:200]


def _kept(kept: tuple[str, list[dict[str, Any]]], judged: list[Judged], ids: set[str]) -> list[Entry]:
    """The rules of the policy in force that no report contradicts, each with a line saying so; a line for each
    that was dropped, and why."""
    source, rules = kept
    out: list[Entry] = []
    for rule in rules:
        against = [j for j in judged if j.contradicts(rule)]
        name = str(rule.get("id", "?"))
        if against:
            why = "a rule of its own" if any(j.ruled for j in against) else f"{rule.get('strategy')} losing there"
            where = ", ".join(f"{j.model or '(no model)'} / {j.format}" for j in against)
            out += ["", f"{name} (from {source}): dropped, this run found {why} ({where})."]
            continue
        covered = [j for j in judged if fnmatch.fnmatchcase(j.model, str(rule.get("model", "*")))]
        said = (
            "this run judged its model and found nothing against it"
            if covered
            else "this run did not judge its model and format"
        )
        out += ["", f"{name}: kept from {source}; {said}.", {**rule, "id": _unique(name, ids)}]
    return out


def _no_rule(task: str, shape: str, fmt: str, model: str, by_strategy: dict[str, list[dict[str, Any]]]) -> list[Entry]:
    """The comment left where a rule would go: why no pipeline qualified, with the closest candidate's figures."""
    rows = [r for rows in by_strategy.values() for r in rows]
    return [
        f"{task} ({shape} prompts, detected as {fmt}) on {model}: no rule. No pipeline's lift holds (above zero,",
        f"at least {MIN_DISCORDANT} pairs that differ, Holm-corrected exact p below {ALPHA}, an interval clear of",
        "the noise floor) without a significant loss in another regime, within the cost ceiling, so auto applies",
        "none to these requests.",
        *_closest(rows),
    ]


def _unique(name: str, ids: set[str]) -> str:
    base = "".join(c if c.isalnum() or c in "._:-" else "-" for c in name)[:60].strip("-") or "rule"
    candidate, number = base, 2
    while candidate in ids:
        candidate, number = f"{base}-{number}", number + 1
    ids.add(candidate)
    return candidate
