"""How detection reads the request bodies popular RAG apps really send, when their documents move.

The bodies are those of tests/strategies/app_prompts/ (Open WebUI, RAGFlow, AnythingLLM, Dify, Onyx, Haystack,
LlamaIndex's chat engines, Quivr, Khoj, R2R, Kotaemon, Verba, QAnything: each app's own template and join). Each body
goes the way of `contextlift detect --strategy "reorder; order=promote"` (the proxy's default settings: limits,
declared formats, caps), with the documents found reversed so that any move shows, and is classified: `intact`,
`declined`, `preserved` or `wrong` (tests/strategies/app_prompts/outcome.py says what each means). Run from the
repository root:

    .venv/bin/python scripts/app_shapes.py
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextlift.proxy.settings import Settings, load_settings
from contextlift.strategies import DocumentLimits
from tests.strategies.app_prompts import OUTCOMES, Outcome, app_shapes, shape_outcome


def outcomes(settings: Settings | None = None) -> dict[str, Outcome]:
    """Each shape's outcome under the proxy's settings (as `contextlift detect` loads them when None), by name."""
    settings = settings or load_settings()
    limits = DocumentLimits(settings.max_documents, settings.max_document_bytes)
    declared = tuple(f.declared() for f in settings.document_formats)
    return {
        shape.name: shape_outcome(shape, limits=limits, declared=declared, caps=settings.strategy_caps)
        for shape in app_shapes()
    }


def main() -> int:
    found = outcomes()
    apps = {shape.name: shape.app for shape in app_shapes()}
    print("| shape | app | outcome | detection |")
    print("|---|---|---|---|")
    for name, result in found.items():
        print(f"| {name} | {apps[name]} | {result.outcome} | {result.detection} |")
    totals = collections.Counter(result.outcome for result in found.values())
    print()
    print(", ".join(f"{totals[outcome]} {outcome}" for outcome in OUTCOMES))
    for name, result in found.items():
        if result.reason:
            print(f"- {name}: {result.reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
