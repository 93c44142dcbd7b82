"""The lift dashboard (deploy/grafana/contextlift-lift.json) against what the proxy exports and what Grafana loads.

- Every query, the variables' `label_values` included, parses (promql-parser: Python bindings of a Rust PromQL
  parser) and reaches only what a real `/metrics` scrape of the proxy holds, after traffic through a scripted
  upstream that exercises each panel: the sample names as Prometheus stores them (`_total`, `_bucket`), every label a
  query filters, groups or matches on, on the series it reaches, and every label value it compares with literally.
- The statistics panels (accuracy and agreement with Wilson's interval, the U, the lift over `none` with Wald's) give,
  as Prometheus evaluates them (`promtool test rules`), the numbers worked out by hand from known counts.
- Grafana publishes no JSON schema of its dashboards; the Grafana Foundation SDK generates its Python models from
  the dashboard schema of Grafana 11.6. The dashboard decodes through them and back without losing a key (a key the
  schema does not know is dropped), and holds to what the JSON model documents: unique panel ids, panels within 24
  columns that do not overlap, each query with its refId and the `${datasource}` variable.
- `kubectl kustomize deploy/grafana` renders one ConfigMap labelled for Grafana's sidecar, the JSON intact.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import re
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import promql_parser as pql
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard
from prometheus_client.parser import text_string_to_metric_families

from contextlift.eval.tasks.litm import Passage, qa_prompt
from contextlift.eval.verdicts.stats import wilson
from tests.benchmark_data import unavailable
from tests.deploy.kustomize import DEPLOY, render
from tests.deploy.test_manifests_and_image import BIN, KUBERNETES_VERSION
from tests.fakes import FakeUpstream, completion
from tests.proxy.shadow.test_shadow_evaluation import settle
from tests.proxy.shadow.test_shadow_probes import lost_in_the_middle, prompt_text

FOLDER = DEPLOY / "grafana"
DASHBOARD = FOLDER / "contextlift-lift.json"
PROBES = "contextlift_shadow_probes_total"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
GRID_COLUMNS = 24
BUILT_IN = {"__rate_interval", "__range", "__interval"}
"""Grafana's own variables that the queries use: durations, written as one so the query parses."""
PLACEHOLDER = "__dashboard_variable__"
"""What a dashboard variable becomes in a query: a matcher holding it is not compared with the scrape's values."""
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")
_LABEL_VALUES = re.compile(r"label_values\((.+),\s*(\w+)\)")
_LITERALS = re.compile(r"[\w\-/: ]+(\|[\w\-/: ]+)*")
"""A regex matcher that only lists values (`correct|wrong`): each must be a value the scrape has."""
_TOPICS = ("harbour", "glacier", "orchard", "violin", "comet", "quarry", "lantern", "meadow", "falcon")
STABLE = "harbour"
"""The question the scripted upstream answers the same whatever the documents' order."""
FAIL = "FAIL-UPSTREAM"


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())  # type: ignore[no-any-return]


# --- the proxy's /metrics after traffic -------------------------------------------------------------------------


def body(topic: str) -> dict[str, Any]:
    """Lost in the Middle's QA prompt over nine documents, asking about `topic`'s."""
    passages = [
        Passage(t.title(), f"The {t} was surveyed in spring; its notes describe the {t} plainly.") for t in _TOPICS
    ]
    prompt = qa_prompt(f"When was the {topic} surveyed?", passages)
    return {"model": "fake-model", "max_tokens": 200, "messages": [{"role": "user", "content": prompt}]}


def scripted(request: httpx.Request) -> httpx.Response:
    """A probe's needle is found only at the edges (a U); the STABLE question has one answer in any order (stable,
    agrees); any other is answered by the first document (sensitive to order; differs where `reorder` moved it)."""
    text = prompt_text(request)
    if FAIL in text:
        return httpx.Response(503, json={"error": {"message": "overloaded"}})
    if re.search(r"\d{7}", text):
        return lost_in_the_middle(request)
    if f"When was the {STABLE} surveyed?" in text:
        return httpx.Response(200, json=completion("In spring."))
    at = {topic: text.find(topic.title()) for topic in _TOPICS if topic.title() in text}
    return httpx.Response(200, json=completion(f"The {min(at, key=at.__getitem__)}." if at else "4."))


def scrape_after_traffic(make_client: Any, fake: FakeUpstream) -> str:
    """`/metrics` after requests that reach every panel: strategies served and declined, `auto`, an upstream
    failure, and shadow evaluation with positional probes of a `reorder` candidate."""
    fake.queue(*[scripted] * 1000)
    client = make_client(
        shadow_rate=1.0,
        shadow_use_client_key=True,
        shadow_strategies=["reorder"],
        shadow_probes=True,
        shadow_queue=100,
        shadow_calls_per_minute=100_000,
    )
    asks = [("none", body("violin")), ("none", body(STABLE)), ("reorder", body("violin")), ("auto", body("comet"))]
    # A plain question: `reorder` finds no documents to read and declines, with its reason.
    asks += [("reorder", {"model": "fake-model", "messages": [{"role": "user", "content": "What is 2 + 2?"}]})]
    for strategy, payload in asks:
        response = client.post("/v1/chat/completions", json=payload, headers={"X-Context-Strategy": strategy})
        assert response.status_code == 200, response.text
    failing = {"model": "fake-model", "messages": [{"role": "user", "content": FAIL}]}
    assert client.post("/v1/chat/completions", json=failing).status_code == 503
    settle(client)
    return str(client.get("/metrics").text)


Series = dict[str, dict[str, set[str]]]
"""Sample name (as Prometheus stores it) to each label's values."""


def series_of(text: str) -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = found.setdefault(sample.name, {})
            for name, value in sample.labels.items():
                labels.setdefault(name, set()).add(value)
    return found


# --- what each query reaches ------------------------------------------------------------------------------------

Labels = frozenset[str] | None
"""The label names a query node's result carries; None for a scalar."""


class _Unknown(Exception):
    """A metric the scrape lacks: nothing more can be said of the query that names it."""


class QueryCheck:
    """Walks one parsed query, carrying the label names each node's result has, and notes every problem."""

    def __init__(self, series: Series) -> None:
        self.series = series
        self.problems: list[str] = []

    def labels(self, node: Any) -> Labels:
        if isinstance(node, pql.NumberLiteral | pql.StringLiteral):
            return None
        if isinstance(node, pql.ParenExpr | pql.UnaryExpr | pql.SubqueryExpr):
            return self.labels(node.expr)
        if isinstance(node, pql.MatrixSelector):
            return self.labels(node.vector_selector)
        if isinstance(node, pql.VectorSelector):
            return self.selector(node)
        if isinstance(node, pql.Call):
            return self.call(node)
        if isinstance(node, pql.AggregateExpr):
            return self.aggregate(node)
        if isinstance(node, pql.BinaryExpr):
            return self.binary(node)
        raise AssertionError(f"no rule for {type(node).__name__}: {node}")

    def require(self, wanted: frozenset[str], present: Labels, what: str) -> None:
        missing = sorted(wanted - (present or frozenset()))
        if missing:
            self.problems.append(f"{what} names {missing}, not on {sorted(present or ())}")

    def selector(self, node: Any) -> Labels:
        matchers = node.matchers.matchers
        name = node.name or next(m.value for m in matchers if m.name == "__name__")
        if name not in self.series:
            family = sorted(s for s in self.series if s.startswith(name))
            self.problems.append(f"{name}: no such series in the scrape" + (f" (it has {family})" if family else ""))
            raise _Unknown
        present = self.series[name]
        for matcher in (m for m in matchers if m.name != "__name__"):
            if matcher.name not in present:
                self.problems.append(f"{name}: no label {matcher.name!r} (it has {sorted(present)})")
            elif PLACEHOLDER not in matcher.value:
                self.value(name, matcher, present[matcher.name])
        return frozenset(present)

    def value(self, name: str, matcher: Any, seen: set[str]) -> None:
        """A literal value must be one the proxy writes: a misspelt one would match nothing, silently."""
        wanted, regex = matcher.value, matcher.op in (pql.MatchOp.Re, pql.MatchOp.NotRe)
        if regex and not _LITERALS.fullmatch(wanted):
            if not any(re.fullmatch(wanted, v) for v in seen):
                self.problems.append(f"{name}: {matcher.name}=~{wanted!r} matches none of {sorted(seen)}")
            return
        for value in wanted.split("|") if regex else [wanted]:
            if value not in seen:
                self.problems.append(f"{name}: {matcher.name} has no value {value!r} (it has {sorted(seen)})")

    def call(self, node: Any) -> Labels:
        args = [self.labels(a) for a in node.args]
        name = node.func.name
        if name == "histogram_quantile":
            self.require(frozenset({"le"}), args[1], "histogram_quantile")
            return (args[1] or frozenset()) - {"le"}
        if name in ("scalar", "time"):
            return None
        return next((a for a in args if a is not None), frozenset() if name == "vector" else None)

    def aggregate(self, node: Any) -> Labels:
        inner = self.labels(node.expr)
        if node.param is not None:
            self.labels(node.param)
        if node.modifier is None:
            return frozenset()
        named = frozenset(node.modifier.labels)
        self.require(named, inner, f"{node.op} {node.modifier.type}")
        return named if node.modifier.type == pql.AggModifierType.By else (inner or frozenset()) - named

    def binary(self, node: Any) -> Labels:
        left, right = self.labels(node.lhs), self.labels(node.rhs)
        if left is None or right is None:
            return right if left is None else left
        modifier = node.modifier
        matching = modifier.matching if modifier is not None else None
        if matching is None and left != right:
            # Matched on every label: sides that carry different labels never match, and the result is empty.
            self.problems.append(f"`{node.op}` without on(): {sorted(left)} against {sorted(right)}")
        elif matching is not None and matching.type == pql.LabelModifierType.Include:
            self.require(frozenset(matching.labels), left, "on() (left)")
            self.require(frozenset(matching.labels), right, "on() (right)")
        elif matching is not None:
            self.require(frozenset(matching.labels), left | right, "ignoring()")
        card = modifier.card if modifier is not None else None
        extra = frozenset(modifier.group_labels or ()) if modifier is not None else frozenset()
        if card == pql.VectorMatchCardinality.ManyToOne:
            self.require(extra, right, "group_left()")
            return left | extra
        if card == pql.VectorMatchCardinality.OneToMany:
            self.require(extra, left, "group_right()")
            return right | extra
        return left & right if str(node.op) == "or" else left


def promql(expr: str) -> str:
    """`expr` near enough to what Prometheus gets to parse: Grafana's durations as `5m`, a variable a placeholder."""
    expr = re.sub(r"\$\{?(__\w+)\}?", "5m", expr)
    return _VARIABLE.sub(PLACEHOLDER, expr)


def queries(model: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, query) of each panel's targets and of each query variable (`label_values(s, l)` reaches what
    `group by (l) (s)` does)."""
    for panel in model["panels"]:
        for target in panel.get("targets", []):
            yield f"{panel['title']!r} {target['refId']}", target["expr"]
    for variable in model["templating"]["list"]:
        if variable["type"] == "query":
            found = _LABEL_VALUES.fullmatch(variable["query"])
            assert found, f"variable {variable['name']}: not label_values(selector, label)"
            yield f"variable {variable['name']}", f"group by ({found[2]}) ({found[1]})"


def query_problems(model: dict[str, Any], series: Series) -> list[str]:
    problems = []
    for where, expr in queries(model):
        try:
            parsed = pql.parse(promql(expr))
        except ValueError as error:
            problems.append(f"{where}: does not parse: {error}")
            continue
        check = QueryCheck(series)
        with contextlib.suppress(_Unknown):
            check.labels(parsed)
        problems += [f"{where}: {problem}" for problem in check.problems]
    return problems


def test_every_query_reaches_metrics_labels_and_values_a_real_scrape_has(make_client: Any, fake: FakeUpstream) -> None:
    series = series_of(scrape_after_traffic(make_client, fake))
    model = dashboard()
    assert query_problems(model, series) == []
    # The panels the issue asks for are there, each on its metric.
    reached = {name for _, expr in queries(model) for name in re.findall(r"contextlift_\w+", expr)}
    assert {
        "contextlift_requests_total", "contextlift_detections_total", "contextlift_rankings_total",
        "contextlift_upstream_calls_total", "contextlift_shadow_samples_total", "contextlift_shadow_agreement_total",
        "contextlift_shadow_probes_total", "contextlift_request_duration_seconds_bucket",
        "contextlift_shadow_latency_ratio_bucket",
    } <= reached  # fmt: skip

    def broken(old: str, new: str, inside: str = "") -> str:
        """The problems found once `old` becomes `new` in the first query that holds both."""
        copied = copy.deepcopy(model)
        targets = (t for p in copied["panels"] for t in p.get("targets", []))
        target = next(t for t in targets if old in t["expr"] and inside in t["expr"])
        target["expr"] = target["expr"].replace(old, new)
        return " ".join(query_problems(copied, series))

    # What each check is for, each shown to fail: a metric as the client library names it (no `_total`), a misspelt
    # label, a misspelt value, a `by` that drops a label an `on()` then needs, and a query that no parser takes.
    assert "contextlift_requests: no such series" in broken("contextlift_requests_total{", "contextlift_requests{")
    assert "no label 'candidat'" in broken('candidate=~"$pipeline"', 'candidat=~"$pipeline"')
    assert "outcome has no value 'agree'" in broken('outcome="agrees"', 'outcome="agree"')
    assert "on() (left) names ['model']" in broken("sum by (model, pipeline)", "sum by (pipeline)", "group_left")
    assert "does not parse" in broken("[$__range]))", "[$__range])")


# --- what the statistics panels compute -------------------------------------------------------------------------

PROBE_COUNTS = {
    ("none", "first"): (10, 0, 0), ("none", "middle"): (4, 6, 0), ("none", "last"): (9, 1, 0),
    ("reorder", "first"): (9, 1, 0), ("reorder", "middle"): (8, 2, 3), ("reorder", "last"): (9, 1, 0),
    ("filter", "first"): (5, 5, 0), ("filter", "middle"): (0, 10, 0), ("filter", "last"): (5, 5, 0),
}  # fmt: skip
"""(pipeline, position): probes answered right, wrong, with an error. `filter` is never right in the middle: its row
must still show (0), not vanish for want of a `correct` series."""
AGREEMENT_COUNTS = {"reorder": (7, 3, 2), "filter": (0, 5, 0)}
"""Candidate: runs that agree, differ, errored."""
_ROUNDED = 1e-3
"""Both sides rounded to it: z is 1.96 in the queries, 1.959964 in contextlift.eval.verdicts.stats.wilson."""


def require_promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        reason = "promtool (Debian's package prometheus) is not on PATH: the panels' statistics cannot be evaluated"
        unavailable(reason)
    return found


def counter(metric: str, labels: dict[str, str], total: int) -> dict[str, str]:
    """A counter from 0 to `total` over ten minutes: `increase` over an hour then reads `total` exactly."""
    written = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{written}}}", "values": f"0+{total / 10}x10"}


def rounded(value: float) -> float:
    inverse = 1 / _ROUNDED  # as PromQL's round() computes it, so both sides land on the same float
    return math.floor(value * inverse + 0.5) / inverse


Rows = dict[tuple[str, str], dict[str, float]]
"""(panel title, refId) to each row's value, the row named by its labels as promtool writes them."""


def put(rows: Rows, panel: str, row: str, *values: float) -> None:
    """`values` as the panel's queries A, B, C ... give them on `row`."""
    for ref, value in zip("ABCDE", values, strict=False):
        rows[(panel, ref)][row] = value


def expected_rows() -> Rows:
    """What each statistics panel should show for PROBE_COUNTS and AGREEMENT_COUNTS, worked out by hand."""
    rows: Rows = defaultdict(dict)
    # Errors are left out, as shadow-report leaves them: (right, answered).
    share = {key: (right, right + wrong) for key, (right, wrong, _) in PROBE_COUNTS.items()}
    for (pipeline, position), (right, n) in share.items():
        row = f'{{model="m", pipeline="{pipeline}", position="{position}"}}'
        put(rows, "Probe accuracy with its interval", row, right / n, *wilson(right / n, n), n)
    pooled: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (pipeline, _), (right, n) in share.items():
        pooled[pipeline][0] += right
        pooled[pipeline][1] += n
    right0, n0 = pooled["none"]
    for pipeline, (right, n) in pooled.items():
        row = f'{{model="m", pipeline="{pipeline}"}}'
        first, middle, last = (
            share[(pipeline, at)][0] / share[(pipeline, at)][1] for at in ("first", "middle", "last")
        )
        put(
            rows,
            "Probe accuracy by the needle's position (the U)",
            row,
            first,
            middle,
            last,
            (first + last) / 2 - middle,
        )
        if pipeline != "none":
            p, p0 = right / n, right0 / n0
            half = 1.96 * math.sqrt(p * (1 - p) / n + p0 * (1 - p0) / n0)
            put(rows, "Lift over none on probes", row, p - p0, p - p0 - half, p - p0 + half, n, n0)
    for candidate, (agrees, differs, _) in AGREEMENT_COUNTS.items():
        n = agrees + differs
        row = f'{{candidate="{candidate}"}}'
        put(rows, "Agreement with the served answer, by candidate", row, agrees / n, *wilson(agrees / n, n), n)
    return rows


def test_the_lift_panels_compute_what_shadow_report_computes(tmp_path: Path) -> None:
    """The accuracy and agreement intervals are shadow-report's Wilson intervals; the lift and its interval are
    Wald's for two proportions; errors are left out; all as Prometheus itself evaluates the panels' queries."""
    promtool = require_promtool()
    series = [
        counter(PROBES, {"model": "m", "pipeline": p, "position": at, "outcome": outcome}, count)
        for (p, at), counts in PROBE_COUNTS.items()
        for outcome, count in zip(("correct", "wrong", "error"), counts, strict=True)
        if count
    ]
    series += [
        counter("contextlift_shadow_agreement_total", {"candidate": candidate, "outcome": outcome}, count)
        for candidate, counts in AGREEMENT_COUNTS.items()
        for outcome, count in zip(("agrees", "differs", "error"), counts, strict=True)
        if count
    ]
    expected = expected_rows()
    exprs = {(p["title"], t["refId"]): t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])}
    assert set(expected) <= set(exprs)
    checks = [
        {
            # Over an hour: every sample of the ten minutes, and `increase` needs no extrapolation.
            "expr": f"round({promql(exprs[key].replace('$__range', '1h')).replace(PLACEHOLDER, '.*')}, {_ROUNDED})",
            "eval_time": "10m",
            "exp_samples": [{"labels": at, "value": rounded(value)} for at, value in rows.items()],
        }
        for key, rows in expected.items()
    ]
    tests = tmp_path / "panels.yaml"
    tests.write_text(json.dumps({"tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}]}))
    result = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# --- the JSON model Grafana loads -------------------------------------------------------------------------------


def layout_problems(model: dict[str, Any]) -> list[str]:
    """What Grafana's JSON model documents that a dashboard needs, beyond its keys."""
    problems = [f"no {key}" for key in ("uid", "title", "schemaVersion", "panels", "templating") if not model.get(key)]
    defined = {v["name"] for v in model["templating"]["list"]}
    taken: set[tuple[int, int]] = set()
    ids = [p["id"] for p in model["panels"]]
    problems += [f"panel id {i} twice" for i in sorted(set(ids)) if ids.count(i) > 1]
    for panel in model["panels"]:
        where, grid = repr(panel["title"]), panel["gridPos"]
        if grid["x"] < 0 or grid["w"] < 1 or grid["h"] < 1 or grid["x"] + grid["w"] > GRID_COLUMNS:
            problems.append(f"{where}: {grid} is not within {GRID_COLUMNS} columns")
        cells = set(itertools.product(range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])))
        if cells & taken:
            problems.append(f"{where}: overlaps another panel")
        taken |= cells
        if panel["type"] == "row":
            continue
        refs = [t.get("refId") for t in panel["targets"]]
        if not refs or None in refs or len(set(refs)) != len(refs):
            problems.append(f"{where}: refIds {refs}")
        for part in (panel, *panel["targets"]):
            if part.get("datasource") != DATASOURCE:
                problems.append(f"{where}: datasource {part.get('datasource')}, not {DATASOURCE}")
        used = {v for t in panel["targets"] for v in _VARIABLE.findall(t["expr"])}
        problems += [f"{where}: ${v} is not a variable" for v in sorted(used - defined - BUILT_IN)]
    return problems


def test_the_dashboard_holds_to_grafanas_json_model() -> None:
    model = dashboard()
    assert layout_problems(model) == []
    (variable,) = [v for v in model["templating"]["list"] if v["name"] == "datasource"]
    assert (variable["type"], variable["query"]) == ("datasource", "prometheus")
    moved, doubled = copy.deepcopy(model), copy.deepcopy(model)
    moved["panels"][1]["gridPos"]["x"] = 20
    doubled["panels"][2]["id"] = doubled["panels"][1]["id"]
    assert any("columns" in p for p in layout_problems(moved))
    assert any("overlaps" in p for p in layout_problems(moved))
    assert any("twice" in p for p in layout_problems(doubled))


def round_trip(model: dict[str, Any]) -> dict[str, Any]:
    """`model` decoded by the Foundation SDK's dashboard models (each panel's options and each Prometheus query by
    its own) and encoded again."""
    register_default_plugins()
    return json.loads(json.dumps(Dashboard.from_json(model), cls=JSONEncoder))  # type: ignore[no-any-return]


def lost(written: Any, decoded: Any, path: str = "") -> list[str]:
    """Where `decoded` lacks or changed what `written` has."""
    if isinstance(written, dict):
        if not isinstance(decoded, dict):
            return [path]
        found = []
        for key, value in written.items():
            found += lost(value, decoded[key], f"{path}.{key}") if key in decoded else [f"{path}.{key}"]
        return found
    if isinstance(written, list):
        if not isinstance(decoded, list) or len(written) != len(decoded):
            return [path]
        return [p for i, (w, d) in enumerate(zip(written, decoded, strict=True)) for p in lost(w, d, f"{path}[{i}]")]
    return [] if written == decoded else [f"{path}: {written!r} became {decoded!r}"]


def test_the_dashboard_decodes_through_grafanas_schema_without_losing_a_key() -> None:
    model = dashboard()
    assert lost(model, round_trip(model)) == []
    misspelt = copy.deepcopy(model)
    misspelt["panels"][1]["gridpos"] = misspelt["panels"][1].pop("gridPos")
    misspelt["panels"][1]["options"]["legend"]["show"] = True
    assert set(lost(misspelt, round_trip(misspelt))) == {".panels[1].gridpos", ".panels[1].options.legend.show"}


# --- loading it -------------------------------------------------------------------------------------------------


def test_kustomize_renders_one_configmap_the_grafana_sidecar_loads(tmp_path: Path) -> None:
    (config_map,) = render(FOLDER)
    assert config_map["kind"] == "ConfigMap"
    # A fixed name: `kubectl apply -k` replaces it; a hashed one would leave the old copy for the sidecar to load.
    assert config_map["metadata"]["name"] == "contextlift-lift-dashboard"
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    text = config_map["data"][DASHBOARD.name]
    assert json.loads(text) == dashboard()
    # `kubectl apply` keeps the whole object in an annotation, and annotations hold 256 KiB at most.
    assert len(text.encode()) < 200 * 1024
    rendered = tmp_path / "grafana.json"
    rendered.write_text(json.dumps(config_map))
    validate = [str(BIN / "kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(rendered)]
    result = subprocess.run(validate, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
