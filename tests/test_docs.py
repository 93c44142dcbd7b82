"""The docs site's reference pages name everything the code defines, and the site builds with strict link checking.

The pages are written from the code by `docs/hooks/reference.py` at every build; these tests take the lists from
the code by other routes (the settings model, the entry points, the error module, a live metrics registry), so a
page that silently drops a setting, strategy, parameter, error code or metric fails here.
"""

from __future__ import annotations

import html
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import contextlift.proxy.errors
from contextlift.proxy.observability.metrics import ProxyMetrics
from contextlift.proxy.settings import ENV_PREFIX, Settings
from contextlift.strategies.rankers.base import published_rankers
from contextlift.strategies.registry import build_registry

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "docs" / "hooks" / "reference.py"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    return _hook()


def _unwrapped(name: str) -> str:
    """A name as the settings page writes it: in code that never wraps mid-word."""
    return f'<code class="nowrap">{name}</code>'


def test_settings_page_names_every_setting_with_its_variable_and_description(reference: ModuleType) -> None:
    page = reference.settings_page()
    for name, field in Settings.model_fields.items():
        row = next((line for line in page.splitlines() if f"| {_unwrapped(name)} |" in line), None)
        assert row is not None, f"setting {name} is missing from the settings page"
        if field.validation_alias is None:
            assert _unwrapped(f"{ENV_PREFIX}{name.upper()}") in row
        assert " ".join((field.description or "").split()) in html.unescape(row.replace("\\", ""))


def test_settings_page_names_the_opentelemetry_variables(reference: ModuleType) -> None:
    page = reference.settings_page()
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"):
        assert _unwrapped(variable) in page


def test_settings_page_names_the_serve_flags(reference: ModuleType) -> None:
    page = reference.settings_page()
    for flag in ("--host", "--port", "--upstream"):
        assert _unwrapped(flag) in page


def test_settings_page_groups_every_setting_in_a_named_section(reference: ModuleType) -> None:
    page = reference.settings_page()
    sections = {part.split("\n", 1)[0]: part for part in page.split("\n## ")[1:]}
    assert list(sections) == [title for title, _, _ in reference.SETTING_SECTIONS]
    for name in Settings.model_fields:
        title = reference.setting_section(name)
        assert title != reference.OTHER_SECTION, f"setting {name} has no section: add it to SETTING_SECTIONS"
        assert f"| {_unwrapped(name)} |" in sections[title]
    assert reference.setting_section("max_upstream_calls") == "The upstream"  # the longest key wins over max_
    assert reference.setting_section("shadow_probe_min_documents") == "Shadow"


def test_setting_names_never_wrap_mid_word_on_the_site() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "extra_css:\n  - stylesheets/extra.css\n" in config
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    assert ".md-typeset code.nowrap {\n  white-space: nowrap;\n}" in css


def test_strategies_page_names_every_registered_strategy_and_parameter(reference: ModuleType) -> None:
    page = reference.strategies_page()
    registry = build_registry()
    sections = page.split("\n## ")
    for name in registry.names():
        section = next((s for s in sections if s.startswith(f"`{name}`\n")), None)
        assert section is not None, f"strategy {name} has no section"
        for param in registry.get(name).params:
            assert f"| `{param.name}` |" in section, f"{name}: parameter {param.name} missing"
        if registry.get(name).ranks:
            assert "| `ranker` |" in section


def test_errors_page_names_every_error_class_and_code(reference: ModuleType) -> None:
    page = reference.errors_page()
    classes = [
        cls
        for _, cls in inspect.getmembers(contextlift.proxy.errors, inspect.isclass)
        if issubclass(cls, contextlift.proxy.errors.ProxyError) and cls.__module__ == contextlift.proxy.errors.__name__
    ]
    assert len(classes) > 20
    for cls in classes:
        row = next((line for line in page.splitlines() if f"`{cls.__name__}` |" in line), None)
        assert row is not None, f"{cls.__name__} is missing from the errors page"
        if cls is not contextlift.proxy.errors.UpstreamStatusError:
            assert f"| {cls.status} | `{cls.type}` | `{cls.code}` |" in row


def test_every_error_row_says_when(reference: ModuleType) -> None:
    page = reference.errors_page()
    classes = [cls for _, cls in reference.error_classes()]
    assert len(classes) > 20
    for cls in classes:
        row = next(line for line in page.splitlines() if f"`{cls.__name__}` |" in line)
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert len(cells) == 5, row
        assert cells[4], f"{cls.__name__}: its row says nothing under 'when'"
    invalid_strategy = next(line for line in page.splitlines() if "`InvalidStrategy` |" in line)
    assert "unknown strategy" in invalid_strategy


def test_error_texts_kept_by_the_hook_name_classes_that_have_none_of_their_own(reference: ModuleType) -> None:
    for name in reference.ERROR_WHEN:
        cls = getattr(contextlift.proxy.errors, name, None)
        assert isinstance(cls, type), f"ERROR_WHEN names {name}, which contextlift.proxy.errors does not define"
        assert issubclass(cls, contextlift.proxy.errors.ProxyError), f"ERROR_WHEN names {name}, not a ProxyError"
        own = cls.__dict__.get("__doc__") or cls.__dict__.get("description")
        assert not own, f"{name} says when itself now: remove it from ERROR_WHEN"


def _strategy_section(page: str, name: str) -> str:
    return next(s for s in page.split("\n## ") if s.startswith(f"`{name}`\n"))


def test_strategies_page_says_what_each_strategy_needs_from_its_flags(reference: ModuleType) -> None:
    page = reference.strategies_page()
    registry = build_registry()
    default_ranker = Settings.model_fields["default_ranker"].default
    embedding_rankers = [name for name, ranker in published_rankers().items() if ranker.needs_embedder]
    assert default_ranker == "lexical"
    assert sorted(embedding_rankers) == ["fusion", "minilm"]
    assert "needs the embedder" not in page
    for name in registry.names():
        strategy = registry.get(name)
        section = _strategy_section(page, name)
        if strategy.passes_through:
            continue
        [needs] = [line for line in section.splitlines() if line.startswith("- needs: ")]
        if strategy.ranks:
            assert f"a ranker: `{default_ranker}` by default" in needs, name
            assert all(f"`{ranker}`" in needs for ranker in embedding_rankers), name
            assert "`embeddings` extra" in needs, name
        if strategy.needs_embedder:
            assert "MiniLM where the `embeddings` extra is installed, else word counts" in needs, name
            assert "similarity=lexical" in needs, name
        if not strategy.ranks and not strategy.needs_embedder:
            assert needs == "- needs: nothing beyond the upstream (no ranker, no embedder)", name
        [documents] = [line for line in section.splitlines() if line.startswith("- needs documents: ")]
        assert documents.startswith("- needs documents: yes" if strategy.needs_documents else "- needs documents: no")
        assert ("it also runs on a context declined as `ambiguous-chunks`" in documents) == strategy.reads_unmovable
    assert "a ranker: `lexical` by default" in _strategy_section(page, "reorder")
    assert "similarity=lexical" in _strategy_section(page, "medoid")


def test_filters_summary_agrees_with_the_strategies_guide(reference: ModuleType) -> None:
    summary = _strategy_section(reference.strategies_page(), "filter").split("\n\n")[1]
    guide = next(
        line for line in (ROOT / "docs" / "strategies.md").read_text().splitlines() if line.startswith("| `filter` |")
    )
    for said in ("within `margin` of the best", "at most `top`", "in the client's order"):
        assert said in summary, f"the reference's filter summary does not say {said!r}: {summary}"
        assert said in guide, f"docs/strategies.md's filter row does not say {said!r}"


def test_every_summary_correction_still_corrects_a_docstring(reference: ModuleType) -> None:
    registry = build_registry()
    summaries = {
        " ".join(inspect.cleandoc(type(registry.get(n)).__doc__ or "").split("\n\n")[0].split())
        for n in registry.names()
    }
    for stale in reference.SUMMARY_CORRECTIONS:
        assert stale in summaries, f"no docstring reads {stale!r} any more: remove it from SUMMARY_CORRECTIONS"


def test_metrics_page_names_every_metric_served(reference: ModuleType) -> None:
    page = reference.metrics_page()
    metrics = ProxyMetrics()
    metrics.watch_cache(lambda: (0, 0))
    families = list(metrics.registry.collect())
    assert len(families) > 15
    for family in families:
        exposed = f"{family.name}_total" if family.type == "counter" else family.name
        assert f"| `{exposed}` | {family.type} |" in page


def test_the_quick_start_and_the_header_walkthrough_are_on_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    assert nav.startswith("  - Home: index.md\n  - Getting started: getting-started.md\n")
    home = (ROOT / "docs" / "index.md").read_text()
    assert "[Getting started](getting-started.md)" in home.split("| guide |", 1)[0]
    assert "is the front page" not in home
    page = (ROOT / "docs" / "getting-started.md").read_text()
    quick_start = page.split("## Quick start in front of your upstream", 1)[1].split("\n## ", 1)[0]
    for step in ("scripts/serve --upstream ", "pip install .", "curl ", "-H 'X-Context-Strategy: reorder'"):
        assert step in quick_start
    walkthrough = page.split("## What the headers say", 1)[1].split("\n## ", 1)[0]
    sent = set(re.findall(r'"(x-context[a-z-]*)"', (ROOT / "proxy" / "request_log.py").read_text()))
    assert len(sent) >= 9
    for header in sent:
        assert f"| `{header}` |" in walkthrough.lower(), f"{header} is not walked through"
    for line in ("x-context-strategy: reorder", "x-context-format: litm", "x-context-order: 3,1,2"):
        assert line in quick_start


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None, reason="mkdocs is not "
                    "installed (the `docs` extra: pip install -e '.[docs]')")  # fmt: skip
def test_the_site_builds_with_strict_link_checking(tmp_path: Path) -> None:
    # A copy of the sources, so the build writes nothing into the work tree.
    root = tmp_path / "src"
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    build = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    for page in ("reference/settings", "reference/strategies", "reference/errors", "reference/metrics"):
        assert (tmp_path / "site" / page / "index.html").is_file()
