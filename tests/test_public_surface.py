"""Each package exports exactly what it says it does, and every export exists."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["contextlift.proxy", "contextlift.strategies", "contextlift.eval"])
def test_all_names_exist_once(package: str) -> None:
    module = importlib.import_module(package)
    assert all(hasattr(module, name) for name in module.__all__)
    assert len(set(module.__all__)) == len(module.__all__)


def test_strategies_export_what_the_proxy_bounds_requests_with() -> None:
    from contextlift import strategies

    assert {"DocumentLimits", "DocumentLimitError", "embed_off_loop"} <= set(strategies.__all__)
    assert issubclass(strategies.DocumentLimitError, ValueError)


def test_eval_does_not_import_the_proxy() -> None:
    import subprocess
    import sys

    imports = "import sys, contextlift.eval.command, contextlift.eval.cli\n"
    code = imports + "assert not any(m.startswith(('contextlift.proxy', 'litestar')) for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serving_never_imports_the_evaluation() -> None:
    """The proxy's own modules, the command line included, load without `eval`: its commands come in through the
    `contextlift.commands` entry point, which this run does not load."""
    import subprocess
    import sys

    code = (
        "import sys, pkgutil, importlib, contextlift.proxy as proxy\n"
        "for m in pkgutil.iter_modules(proxy.__path__): importlib.import_module('contextlift.proxy.' + m.name)\n"
        "assert not any(m.startswith(('contextlift.eval', 'matplotlib')) for m in sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_eval_commands_come_in_as_a_plugin() -> None:
    from importlib.metadata import entry_points

    from contextlift.proxy.cli import COMMANDS_GROUP, _parser

    assert "contextlift.eval.cli:register_commands" in {e.value for e in entry_points(group=COMMANDS_GROUP)}
    assert _parser().parse_args(["eval-merge", "a", "--out", "b"]).settings is False


def test_strategies_do_not_import_the_http_edge() -> None:
    import subprocess
    import sys

    code = "import sys, contextlift.strategies\n"
    code += "assert not any(m.startswith(('contextlift.proxy', 'litestar')) for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_built_in_strategy_is_published_as_an_entry_point() -> None:
    from importlib.metadata import entry_points

    assert "none" in {e.name for e in entry_points(group="contextlift.strategies")}
