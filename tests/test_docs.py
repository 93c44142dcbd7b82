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
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import proxy.errors
from proxy.observability.metrics import ProxyMetrics
from proxy.settings import ENV_PREFIX, Settings
from strategies.registry import build_registry

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


def test_settings_page_names_every_setting_with_its_variable_and_description(reference: ModuleType) -> None:
    page = reference.settings_page()
    for name, field in Settings.model_fields.items():
        row = next((line for line in page.splitlines() if f"| `{name}` |" in line), None)
        assert row is not None, f"setting {name} is missing from the settings page"
        if field.validation_alias is None:
            assert f"`{ENV_PREFIX}{name.upper()}`" in row
        assert " ".join((field.description or "").split()) in html.unescape(row.replace("\\", ""))


def test_settings_page_names_the_opentelemetry_variables(reference: ModuleType) -> None:
    page = reference.settings_page()
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"):
        assert f"`{variable}`" in page


def test_settings_page_names_the_serve_flags(reference: ModuleType) -> None:
    page = reference.settings_page()
    for flag in ("--host", "--port", "--upstream"):
        assert f"`{flag}`" in page


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
        for _, cls in inspect.getmembers(proxy.errors, inspect.isclass)
        if issubclass(cls, proxy.errors.ProxyError) and cls.__module__ == proxy.errors.__name__
    ]
    assert len(classes) > 20
    for cls in classes:
        row = next((line for line in page.splitlines() if f"`{cls.__name__}` |" in line), None)
        assert row is not None, f"{cls.__name__} is missing from the errors page"
        if cls is not proxy.errors.UpstreamStatusError:
            assert f"| {cls.status} | `{cls.type}` | `{cls.code}` |" in row


def test_metrics_page_names_every_metric_served(reference: ModuleType) -> None:
    page = reference.metrics_page()
    metrics = ProxyMetrics()
    metrics.watch_cache(lambda: (0, 0))
    families = list(metrics.registry.collect())
    assert len(families) > 15
    for family in families:
        exposed = f"{family.name}_total" if family.type == "counter" else family.name
        assert f"| `{exposed}` | {family.type} |" in page


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
