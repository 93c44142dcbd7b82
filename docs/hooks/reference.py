"""mkdocs hook: the reference pages, written from the code at every build so that they cannot drift from it.

`Settings`' fields (variable, flag, default, description) in the sections `SETTING_SECTIONS` places them in, the
strategies the registry loads from the `contextlift.strategies` entry points (role, what each needs as its flags
say, parameters), the error tree of `contextlift.proxy.errors` and the metrics a fresh `ProxyMetrics` registers.
`tests/test_docs.py` checks each page names every one of them. The only hand-written text here stands in for what
the code does not say yet (`SUMMARY_CORRECTIONS`, `ERROR_WHEN`); a test flags an entry the code has overtaken.

The pages are also committed under docs/reference/, so that links to them resolve where the repository is read
without a build (the code host). The build never reads those copies: it writes each page afresh from the code.
`.venv/bin/python docs/hooks/reference.py` rewrites them, and tests/docs/test_reference_pages_are_current.py fails
when a committed page is not what the code gives.
"""

from __future__ import annotations

import argparse
import html
import inspect
import re
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlift.proxy.errors import ProxyError

PAGES = {
    "reference/settings.md": "settings_page",
    "reference/strategies.md": "strategies_page",
    "reference/errors.md": "errors_page",
    "reference/metrics.md": "metrics_page",
}
GENERATED_NOTE = (
    "*Generated from the code by `docs/hooks/reference.py` at every build of the site; "
    "`.venv/bin/python docs/hooks/reference.py` rewrites the committed copy. Edit the code, not this page.*"
)


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages to the build, in place of the committed copies."""
    from mkdocs.structure.files import File

    for path, content in pages().items():
        committed = files.get_file_from_path(path)
        if committed is not None:
            files.remove(committed)
        files.append(File.generated(config, path, content=content))
    return files


def pages() -> dict[str, str]:
    """Each reference page, by its path under docs/, as the code gives it now (the text a committed copy holds)."""
    return {path: globals()[builder]().rstrip("\n") + "\n" for path, builder in PAGES.items()}


def write_pages(docs: Path) -> list[str]:
    """Write the committed copies under `docs`; returns the paths whose text changed."""
    changed = []
    for path, content in pages().items():
        target = docs / path
        if not target.is_file() or target.read_text(encoding="utf-8") != content:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            changed.append(path)
    return changed


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

    from contextlift.proxy.settings import ENV_PREFIX

    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    if isinstance(alias, str):
        return [alias]
    return [f"{ENV_PREFIX}{name.upper()}"]


def _serve_flags() -> dict[str, str]:
    """`contextlift serve`'s flags by the setting they set."""
    from contextlift.proxy.cli import _parser

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


SETTING_SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Serving", "Where the proxy listens, and how its process runs and stops.",
     ("host", "port", "event_loop", "gc_tuned", "shutdown_grace")),
    ("The upstream", "Where requests go, with which key, and how a failed call is retried.",
     ("upstream_", "max_upstream_", "max_retries", "retry_")),
    ("Limits", "What one connection, request or stream may take before it is refused or cut off.",
     ("max_", "header_read_timeout", "body_read_timeout", "keepalive_timeout", "client_write_timeout")),
    ("Strategies and rankers", "What a request that names no strategy gets, what it may ask for, and what ranks.",
     ("default_strategies", "document_formats", "strategy_caps", "rankers", "default_ranker", "lexical_language",
      "ranker_gates", "strategy_seed", "unproven_fallback", "stream_keepalive")),
    ("Embedder", "all-MiniLM-L6-v2 in the process, where the `embeddings` extra is installed.",
     ("embedder", "embedding_")),
    ("Policy", "What `X-Context-Strategy: auto` applies ([Auto](../auto.md)).", ("policy_",)),
    ("Shadow", "Candidates tried on live traffic, out of the client's path ([Shadow](../shadow.md)).", ("shadow_",)),
    ("Observability", "Logs and traces; the metrics need no setting ([Metrics](metrics.md)).", ("log_", "otel_")),
    ("Local model", "The embedded llama.cpp server and its model, started when no upstream is set.",
     ("local_model", "local_model_")),
)  # fmt: skip
"""The settings page's sections, in order: a key ending in `_` takes every field it starts, another key the field of
that name; the longest key that matches places a field (`max_upstream_calls` in the upstream's, not with `max_`).
A field no key matches lands in `OTHER_SECTION`, which tests/test_docs.py refuses: place it here."""
OTHER_SECTION = "Other"


def setting_section(name: str) -> str:
    """The section of the settings page a field belongs in."""
    matches = [
        (len(key), title)
        for title, _, keys in SETTING_SECTIONS
        for key in keys
        if (name.startswith(key) if key.endswith("_") else name == key)
    ]
    return max(matches)[1] if matches else OTHER_SECTION


def _name(text: str) -> str:
    """A variable, key or flag that never wraps mid-word (`.nowrap`, docs/stylesheets/extra.css)."""
    return f'<code class="nowrap">{html.escape(text)}</code>'


def settings_page() -> str:
    from contextlift.proxy.settings import Settings

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
    ]
    sections: dict[str, list[str]] = {title: [] for title, _, _ in SETTING_SECTIONS}
    for name, field in Settings.model_fields.items():
        variables = " / ".join(_name(v) for v in setting_variables(name, field))
        flag = _name(flags[name]) if name in flags else ""
        sections.setdefault(setting_section(name), []).append(
            f"| {variables} | {_name(name)} | {flag} | {_cell(_default(field))} | {_cell(field.description or '')} |"
        )
    intros = {title: intro for title, intro, _ in SETTING_SECTIONS}
    for title, rows in sections.items():
        if rows:
            lines += [f"## {title}", "", intros.get(title, "Settings not yet placed in a section."), ""]
            lines += ["| variable | TOML key | flag | default | meaning |", "|---|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


# --- strategies -------------------------------------------------------------------------------------------------


def _param_row(param: Any) -> str:
    kind = {int: "integer", float: "number", str: "text"}[param.kind]
    if param.choices:
        kind = " \\| ".join(_code(choice) for choice in param.choices)
    default = "unset" if param.default is None else _code(param.default)
    minimum = "" if param.minimum is None else _code(param.minimum)
    cap = "" if param.maximum is None else _code(param.maximum)
    return f"| {_code(param.name)} | {kind} | {default} | {minimum} | {cap} | {_cell(param.description)} |"


SUMMARY_CORRECTIONS: dict[str, str] = {}
"""A class docstring's summary that says other than its code does, and what the page says instead, until the
docstring is mended (`filter` keeps those within `margin`, then at most `top`: docs/strategies.md). Keyed by the text
itself, so a mended docstring is read as it is; tests/test_docs.py flags an entry that no longer corrects anything."""


def strategy_summary(strategy: Any) -> str:
    """The first paragraph of a strategy's class docstring, as the page gives it."""
    summary = " ".join(_first_paragraph(type(strategy).__doc__).split())
    return SUMMARY_CORRECTIONS.get(summary, summary)


def _default_ranker() -> str:
    """The ranker of a step that names none, as the proxy's settings default it."""
    from contextlift.proxy.settings import Settings

    return str(Settings.model_fields["default_ranker"].default)


def _listed(names: list[str]) -> str:
    quoted = [_code(n) for n in names]
    return " and ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)


def _embedding_rankers() -> list[str]:
    from contextlift.strategies.rankers.base import published_rankers

    return sorted(name for name, ranker in published_rankers().items() if ranker.needs_embedder)


def strategy_needs(strategy: Any) -> str:
    """What a strategy needs in the proxy to run, read from its flags (`ranks`, `needs_embedder`) and the rankers
    published here: a ranker, MiniLM, or nothing beyond the upstream."""
    from contextlift.strategies.embedder import EXTRA

    needs = []
    if strategy.ranks:
        needs.append(
            f"a ranker: {_code(_default_ranker())} by default; {_listed(_embedding_rankers())} need the "
            f"{_code(EXTRA)} extra"
        )
    if strategy.needs_embedder:
        needs.append(
            f"MiniLM where the {_code(EXTRA)} extra is installed, else word counts (`similarity=lexical` in "
            "`X-Context-Strategy`)"
        )
    return "; and ".join(needs) or "nothing beyond the upstream (no ranker, no embedder)"


def strategy_documents(strategy: Any) -> str:
    """Whether a strategy needs documents, and which, read from `needs_documents` and `reads_unmovable`."""
    if not strategy.needs_documents:
        return "no: it runs on any request"
    found = "yes (found in the prompt, or read in the shape `format=` names)"
    if strategy.reads_unmovable:
        return f"{found}; it also runs on a context declined as `ambiguous-chunks`, reading its paragraphs, moving none"
    return f"{found}; a request without them, a context declined as `ambiguous-chunks` included, skips the step"


def strategies_page() -> str:
    from contextlift.strategies.embedder import EXTRA
    from contextlift.strategies.plugin import FORMAT_PARAM, RANKER_PARAM
    from contextlift.strategies.rankers.base import ENTRY_POINT_GROUP as RANKER_GROUP
    from contextlift.strategies.registry import ENTRY_POINT_GROUP, build_registry

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
        lines += [f"## `{name}`", "", _prose(strategy_summary(strategy)), ""]
        capabilities = [f"role: {strategy.role.value}"]
        if strategy.passes_through:
            capabilities.append("passes the request through untouched; stands alone")
        else:
            capabilities += [
                f"needs documents: {strategy_documents(strategy)}",
                f"needs: {strategy_needs(strategy)}",
            ]
        capabilities += [
            f"streams directly: {'yes' if strategy.streams_directly else 'no'}",
            f"answers `n` > 1: {'yes' if strategy.answers_n else 'no'}",
        ]
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
        f"Published under `{RANKER_GROUP}`: {', '.join(_code(r) for r in rankers)}. {_code(_default_ranker())} is "
        f"the default; {_listed(_embedding_rankers())} use MiniLM and need the {_code(EXTRA)} extra "
        f"(`pip install 'contextlift[{EXTRA}]'`, or `scripts/install {EXTRA}`). The operator adds services with "
        "`CONTEXTLIFT_RANKERS` ([Rankers](../rankers.md)).",
        "",
    ]
    return "\n".join(lines)


# --- errors -----------------------------------------------------------------------------------------------------


def error_classes() -> Iterator[tuple[int, type[ProxyError]]]:
    """Every class of the error tree, depth first from `ProxyError`, with its depth."""
    import contextlift.proxy.errors as errors

    def walk(cls: type[ProxyError], depth: int) -> Iterator[tuple[int, type[ProxyError]]]:
        yield depth, cls
        subclasses: list[type[ProxyError]] = cls.__subclasses__()
        for sub in sorted(subclasses, key=lambda c: inspect.getsourcelines(c)[1]):
            if sub.__module__ == errors.__name__:
                yield from walk(sub, depth + 1)

    return walk(errors.ProxyError, 0)


ERROR_WHEN: dict[str, str] = {}
"""What the page says an error class is for where the class carries neither docstring nor `description`: the one
place this text lives until `proxy/errors.py` carries it. A class's own docstring or `description` wins."""


def error_when(cls: type) -> str:
    """When an error class is raised: its docstring's first paragraph, its `description`, else `ERROR_WHEN`."""
    doc = _first_paragraph(cls.__dict__.get("__doc__"))
    return doc or str(cls.__dict__.get("description") or "") or ERROR_WHEN.get(cls.__name__, "")


def errors_page() -> str:
    import contextlift.proxy.errors as errors

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
        lines.append(f"| {indent}`{cls.__name__}` | {status} | {kind} | {code} | {_cell(error_when(cls))} |")
    lines += ["", "The tree as `proxy/errors.py` draws it:", "", "```text", _tree_drawing(errors.__doc__ or ""), "```"]
    return "\n".join(lines) + "\n"


def _tree_drawing(doc: str) -> str:
    drawn = [line for line in inspect.cleandoc(doc).splitlines() if line.startswith("    ")]
    return "\n".join(line[4:] for line in drawn)


# --- metrics ----------------------------------------------------------------------------------------------------


def metric_families() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(exposed name, type, help, labels) of every metric a proxy serves at `/metrics`."""
    from prometheus_client.metrics import MetricWrapperBase

    from contextlift.proxy.observability.metrics import ProxyMetrics

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


if __name__ == "__main__":
    rewritten = write_pages(Path(__file__).resolve().parents[1])
    print("\n".join(f"rewrote docs/{path}" for path in rewritten) or "docs/reference/ is current")
