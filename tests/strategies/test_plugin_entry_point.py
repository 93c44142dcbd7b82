"""The example strategy of docs/writing-a-strategy.md, installed the way a user installs one (a distribution on
the path whose metadata publishes it under `contextlift.strategies`), is found by the registry and runs in a
pipeline; a plugin that reuses a taken name is refused."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from tests.strategies.scripted import ScriptedUpstream

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-strategy.md"


def example() -> tuple[str, dict[str, str]]:
    """The strategy module and the entry points of the "Writing a strategy" guide, as written there."""
    section = GUIDE.read_text()
    code = re.search(r"```python\n(.*?)```", section, re.S)
    toml = re.search(r"```toml\n(.*?)```", section, re.S)
    assert code
    assert toml
    return code[1], tomllib.loads(toml[1])["project"]["entry-points"]["contextlift.strategies"]


def install(site: Path, name: str, module: str, entries: dict[str, str]) -> None:
    (site / f"{module}.py").write_text(example()[0])
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"  # as a wheel names it: the name ends at the first "-"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
    (info / "entry_points.txt").write_text(f"[contextlift.strategies]\n{lines}")


def test_the_guide_example_is_a_whole_strategy_in_about_twenty_lines() -> None:
    code, entries = example()
    assert len(code.strip().splitlines()) <= 25
    assert set(entries) == {"dedupe"}


async def test_the_guide_example_installs_through_its_entry_point_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, "contextlift-dedupe", "contextlift_dedupe", example()[1])
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = build_registry()
    assert "dedupe" in registry
    assert {"none", "reorder", "recite", "medoid", "chain"} <= set(registry.names())
    lines = ["Document [1](Title: A) Cats purr.", "Document [2](Title: B) cats purr.", "Document [3](Title: C) Dogs."]
    body = {"model": "m", "messages": [{"role": "user", "content": "\n".join(lines) + "\n\nQuestion: who purrs?"}]}
    upstream = ScriptedUpstream("ok")
    pipeline = registry.resolve(parse_selection("dedupe; case=fold"), {})
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services())
    assert result.applied == "dedupe; case=fold; dropped=1"
    assert (
        upstream.prompts[0] == "Document [1](Title: A) Cats purr.\nDocument [2](Title: C) Dogs.\n\nQuestion: who purrs?"
    )


def test_a_plugin_cannot_take_a_built_in_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, "contextlift-dedupe", "contextlift_dedupe", {"dedupe": "contextlift_dedupe:Dedupe"})
    install(tmp_path, "contextlift-dedupe-again", "contextlift_dedupe_again", {"again": "contextlift_dedupe:Dedupe"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="'dedupe' is already registered"):
        build_registry()
