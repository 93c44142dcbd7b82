"""mkdocs hook: the reference pages, written from the code at every build so that they cannot drift from it.

`Settings`' fields (variable, flag, default, description), the strategies the registry loads from the
`contextlift.strategies` entry points (role, capability flags, parameters), the error tree of `proxy.errors`
and the metrics a fresh `ProxyMetrics` registers. `tests/test_docs.py` checks each page names every one of them.
"""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

PAGES = {
    "reference/settings.md": "settings_page",
    "reference/strategies.md": "strategies_page",
    "reference/errors.md": "errors_page",
    "reference/metrics.md": "metrics_page",
}
GENERATED_NOTE = "*Generated from the code at build time (`docs/hooks/reference.py`); edit the code, not this page.*"


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the build."""
    from mkdocs.structure.files import File

    for path, builder in PAGES.items():
        files.append(File.generated(config, path, content=globals()[builder]()))
    return files


def _cell(text: object) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    return _prose(" ".join(str(text).split())).replace("|", "\\|")


def _prose(text: str) -> str:
    """Text from the code read as written: outside `code spans`, no emphasis, HTML or link is made of it
    (`{"*": "none"}`, `"<kb>"` and `[{...}]` appear in descriptions)."""
    parts = re.split(r"(`[^`]*`)", text)
    for index in range(0, len(parts), 2):
        parts[index] = re.sub(r"([\\*_\[\]])", r"\\\1", parts[index]).replace("<", "&lt;").replace(">", "&gt;")
    return "".join(parts)


def _code(value: object) -> str:
    text = str(value)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n", 1)[0]


# --- settings ---------------------------------------------------------------------------------------------------


def setting_variables(name: str, field: Any) -> list[str]:
    """The environment variables that set a field: `CONTEXTLIFT_<NAME>`, or the aliases it declares instead."""
    from pydantic import AliasChoices

    from proxy.settings import ENV_PREFIX

    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    if isinstance(alias, str):
        return [alias]
    return [f"{ENV_PREFIX}{name.upper()}"]


def _serve_flags() -> dict[str, str]:
    """`contextlift serve`'s flags by the setting they set."""
    from proxy.cli import _parser

    parser = _parser()
    flags: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            serve = action.choices["serve"]
            for option in serve._actions:
                if option.option_strings and option.dest not in ("help", "config"):
                    flags[option.dest] = option.option_strings[0]
    return flags


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return _code(field.default_factory())
    if field.default is None:
        return "unset"
    if hasattr(field.default, "value"):  # an enum
        return _code(field.default.value)
    return _code(field.default)


def settings_page() -> str:
    from proxy.settings import Settings

    flags = _serve_flags()
    lines = [
        "# Settings",
        "",
        GENERATED_NOTE,
        "",
        "Each setting is an environment variable, a key (the field name) in the TOML file given with `--config`, "
        "or, for some, a flag of `contextlift serve`; flags override variables, which override the file. "
        "[Configuration](../configuration.md) shows an example file.",
        "",
        "| variable | TOML key | flag | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        variables = " / ".join(_code(v) for v in setting_variables(name, field))
        flag = _code(flags[name]) if name in flags else ""
        lines.append(
            f"| {variables} | {_code(name)} | {flag} | {_cell(_default(field))} | {_cell(field.description or '')} |"
        )
    return "\n".join(lines) + "\n"


# --- strategies -------------------------------------------------------------------------------------------------


def _param_row(param: Any) -> str:
    kind = {int: "integer", float: "number", str: "text"}[param.kind]
    if param.choices:
        kind = " \\| ".join(_code(choice) for choice in param.choices)
    default = "unset" if param.default is None else _code(param.default)
    minimum = "" if param.minimum is None else _code(param.minimum)
    cap = "" if param.maximum is None else _code(param.maximum)
    return f"| {_code(param.name)} | {kind} | {default} | {minimum} | {cap} | {_cell(param.description)} |"


def strategies_page() -> str:
    from strategies.plugin import FORMAT_PARAM, RANKER_PARAM
    from strategies.rankers.base import ENTRY_POINT_GROUP as RANKER_GROUP
    from strategies.registry import ENTRY_POINT_GROUP, build_registry

    registry = build_registry()
    sources = {entry.name: entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)}
    lines = [
        "# Strategies",
        "",
        GENERATED_NOTE,
        "",
        f"Every strategy published under the entry-point group `{ENTRY_POINT_GROUP}` in this installation, the "
        "built-ins included, as the registry loads them. A step is `name[; key=value ...]`; a value above its cap "
        "(or the operator's, `CONTEXTLIFT_STRATEGY_CAPS`) is a 400. [Strategies](../strategies.md) says what each "
        "does and what it earned; [Writing a strategy](../writing-a-strategy.md) how to add one.",
        "",
    ]
    for name in registry.names():
        strategy = registry.get(name)
        lines += [f"## `{name}`", "", _prose(_first_paragraph(type(strategy).__doc__)), ""]
        capabilities = [
            f"role: {strategy.role.value}",
            f"needs documents: {'yes' if strategy.needs_documents else 'no'}",
            f"streams directly: {'yes' if strategy.streams_directly else 'no'}",
            f"needs the embedder: {'yes' if strategy.needs_embedder else 'no'}",
            f"ranks documents: {'yes' if strategy.ranks else 'no'}",
            f"answers `n` > 1: {'yes' if strategy.answers_n else 'no'}",
        ]
        if strategy.passes_through:
            capabilities.append("passes the request through untouched; stands alone")
        lines += [f"- {c}" for c in capabilities]
        if name in sources:
            lines.append(f"- published as `{sources[name]}`")
        lines.append("")
        params = list(strategy.params)
        if strategy.needs_documents and not strategy.passes_through:
            params.append(FORMAT_PARAM)
        if strategy.ranks:
            params.append(RANKER_PARAM)
        if params:
            lines += [
                "| parameter | type | default | minimum | cap | meaning |",
                "|---|---|---|---|---|---|",
                *(_param_row(p) for p in params),
                "",
            ]
        else:
            lines += ["No parameters.", ""]
    rankers = sorted(entry.name for entry in entry_points(group=RANKER_GROUP))
    lines += [
        "## Rankers",
        "",
        f"Published under `{RANKER_GROUP}`: {', '.join(_code(r) for r in rankers)}; the operator adds services with "
        "`CONTEXTLIFT_RANKERS` ([Rankers](../rankers.md)).",
        "",
    ]
    return "\n".join(lines)


# --- errors -----------------------------------------------------------------------------------------------------


def error_classes() -> Iterator[tuple[int, type]]:
    """Every class of the error tree, depth first from `ProxyError`, with its depth."""
    import proxy.errors as errors

    def walk(cls: type, depth: int) -> Iterator[tuple[int, type]]:
        yield depth, cls
        for sub in sorted(cls.__subclasses__(), key=lambda c: inspect.getsourcelines(c)[1]):
            if sub.__module__ == errors.__name__:
                yield from walk(sub, depth + 1)

    return walk(errors.ProxyError, 0)


def errors_page() -> str:
    import proxy.errors as errors

    lines = [
        "# Errors",
        "",
        GENERATED_NOTE,
        "",
        'Everything the proxy rejects itself is answered in the OpenAI envelope `{"error": {"message", "type", '
        '"param", "code"}}`, with the status, `type` and `code` of its class below. An error the upstream answered '
        "reaches the client as it came (`UpstreamStatusError`). [Reliability](../reliability.md) says when each "
        "happens.",
        "",
        "| class | HTTP status | `type` | `code` | when |",
        "|---|---|---|---|---|",
    ]
    for depth, cls in error_classes():
        relayed = cls is errors.UpstreamStatusError
        status = "the upstream's" if relayed else str(cls.status)
        kind = "the upstream's" if relayed else _code(cls.type)
        code = "the upstream's" if relayed else _code(cls.code)
        indent = "&nbsp;&nbsp;" * depth
        doc = _first_paragraph(cls.__doc__)
        lines.append(f"| {indent}`{cls.__name__}` | {status} | {kind} | {code} | {_cell(doc)} |")
    lines += ["", "The tree as `proxy/errors.py` draws it:", "", "```text", _tree_drawing(errors.__doc__ or ""), "```"]
    return "\n".join(lines) + "\n"


def _tree_drawing(doc: str) -> str:
    drawn = [line for line in inspect.cleandoc(doc).splitlines() if line.startswith("    ")]
    return "\n".join(line[4:] for line in drawn)


# --- metrics ----------------------------------------------------------------------------------------------------


def metric_families() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(exposed name, type, help, labels) of every metric a proxy serves at `/metrics`."""
    from prometheus_client.metrics import MetricWrapperBase

    from proxy.observability.metrics import ProxyMetrics

    metrics = ProxyMetrics()
    metrics.watch_cache(lambda: (0, 0))
    labels = {
        wrapper._name: tuple(wrapper._labelnames)
        for wrapper in vars(metrics).values()
        if isinstance(wrapper, MetricWrapperBase)
    }
    families = []
    for family in metrics.registry.collect():
        exposed = f"{family.name}_total" if family.type == "counter" else family.name
        families.append((exposed, family.type, family.documentation, labels.get(family.name, ())))
    return sorted(families)


def metrics_page() -> str:
    lines = [
        "# Metrics",
        "",
        GENERATED_NOTE,
        "",
        "Served in Prometheus' text format at `GET /metrics`, one registry per app. Histograms add `_bucket`, "
        "`_sum` and `_count` series. Labels are bounded: a model label takes the first 20 model names seen, then "
        "`other` (`invalid` for a name that is too long or unprintable). [Deploy](../deploy.md) shows how to read "
        "them.",
        "",
        "| metric | type | labels | meaning |",
        "|---|---|---|---|",
    ]
    for name, kind, documentation, label_names in metric_families():
        label_text = ", ".join(_code(label) for label in label_names)
        lines.append(f"| `{name}` | {kind} | {label_text} | {_cell(documentation)} |")
    return "\n".join(lines) + "\n"
