"""`contextlift detect`: what the proxy finds in a request body, printed for a person debugging their prompt; with
`--strategy`, the body the proxy would send upstream, without calling any model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contextlift.proxy.app import unproven_fallback_step
from contextlift.proxy.edge.intake import check_chat_body, parse_json_object
from contextlift.proxy.errors import ProxyError
from contextlift.proxy.remote_rankers import build_rankers
from contextlift.proxy.settings import Settings, SettingsError
from contextlift.strategies import (
    ChatRequest,
    Completion,
    CompletionStream,
    DocumentLimitError,
    DocumentLimits,
    Services,
    StepContext,
    StrategySelectionError,
    apply_transforms,
    build_registry,
    document_order,
    explain_detection,
    parse_request,
    parse_selection,
    rankings_of,
    render_applied,
    render_explanation,
)
from contextlift.strategies.embedder import embeddings_installed
from contextlift.strategies.rankers import RankerSet
from contextlift.strategies.rankers.base import published_rankers
from contextlift.strategies.rankers.gate import merged as merged_gates


def detect_command(
    path: Path | None, shape: str | None, *, as_json: bool, settings: Settings, strategy: str | None = None
) -> int:
    """Read a chat-completions body from `path` (standard input when None), print detection's findings; with
    `strategy`, print what its transforms would send upstream instead.

    Returns 0, or 2 when the body cannot be read, is larger than the proxy takes (`max_body_bytes`, read no further),
    is not a chat-completions body, or the strategy is invalid.
    """
    limit = settings.max_body_bytes
    try:
        with open(path, "rb") if path is not None else contextlib.nullcontext(sys.stdin.buffer) as source:
            raw = source.read(limit + 1)  # past the limit, not a byte more: a body the proxy would refuse unread
    except OSError as error:
        print(f"contextlift detect: cannot read {path}: {error.strerror}", file=sys.stderr)
        return 2
    if len(raw) > limit:
        where = path if path is not None else "standard input"
        print(f"contextlift detect: {where}: larger than max_body_bytes ({limit} bytes), the most the proxy reads",
              file=sys.stderr)  # fmt: skip
        return 2
    declared = tuple(f.declared() for f in settings.document_formats)
    limits = DocumentLimits(settings.max_documents, settings.max_document_bytes, settings.max_scanned_chars)
    try:
        body = parse_json_object(raw)
        check_chat_body(body)
        if strategy is not None:
            preview = asyncio.run(_preview(body, strategy, shape, settings, limits))
            print(json.dumps(preview, ensure_ascii=False, indent=2) if as_json else _render_preview(preview), end="")
            return 0
        found = explain_detection(body, limits=limits, declared=declared, shape=shape)
    except ProxyError as error:
        print(f"contextlift detect: {error.message}", file=sys.stderr)
        return 2
    except (DocumentLimitError, StrategySelectionError, SettingsError, ValueError) as error:
        print(f"contextlift detect: {error}", file=sys.stderr)
        return 2
    print(json.dumps(found, ensure_ascii=False, indent=2) if as_json else render_explanation(found), end="")
    return 0


class _NoModel:
    """The upstream of a preview: an executor is not run, and a transform that asks the model (`pick`) gets an empty
    answer, so the preview shows the request as it goes on when the model names no passage (`skipped=no-pick`)."""

    async def complete(self, body: Mapping[str, Any]) -> Completion:
        return Completion({"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}]})

    async def stream(self, body: Mapping[str, Any]) -> CompletionStream:
        raise RuntimeError("a preview calls no model")


async def _preview(
    body: dict[str, Any], strategy: str, shape: str | None, settings: Settings, limits: DocumentLimits
) -> dict[str, Any]:
    """The body the transforms of `strategy` would send upstream, what ran, and where the documents went.

    Raises:
        StrategySelectionError: the strategy is malformed or names what is not registered.
        SettingsError: `unproven_fallback` names no step that adds beside an unmovable context.
        ValueError: the configured rankers are invalid.
    """

    registry = build_registry()
    rankers = build_rankers(settings.rankers, published_rankers(), settings.default_ranker)
    registry.rankers = frozenset(rankers)
    pipeline = registry.resolve(parse_selection(strategy), settings.strategy_caps)
    declared = tuple(f.declared() for f in settings.document_formats)
    # As a request: `none` reads nothing of the prompt, so finds no documents.
    steps = pipeline.steps
    request = (
        parse_request(body, limits, declared=declared, shape=shape or pipeline.shape) if steps else ChatRequest(body)
    )
    embedder = None
    ranker_set = RankerSet(
        rankers, settings.default_ranker, language=settings.lexical_language, gates=merged_gates(settings.ranker_gates)
    )
    if pipeline.waits_for_embedder(ranker_set) and embeddings_installed():
        from contextlift.strategies import SentenceTransformerEmbedder

        device = None if settings.embedding_device == "auto" else settings.embedding_device
        embedder = SentenceTransformerEmbedder(device=device)
        ranker_set = RankerSet(
            rankers,
            settings.default_ranker,
            embedder,
            language=settings.lexical_language,
            gates=merged_gates(settings.ranker_gates),
        )
    fallback = unproven_fallback_step(registry, settings)
    services = Services(embedder=embedder, rankers=ranker_set, seed=settings.strategy_seed, unproven_fallback=fallback)
    context = StepContext(_NoModel(), services)
    # The transforms skip what a request's would (a step that needs documents, on a request without any).
    sent = await apply_transforms(pipeline, request, context)
    order = document_order(request.documents, sent.sent_documents) if request.documents else None
    executor = pipeline.executor
    units = request.unmovable.documents if request.unmovable is not None else ()
    return {
        "format": request.detection,
        "documents_found": len(request.documents),
        "units_unmovable": len(units),
        "strategy": render_applied(context.applied),
        "order": None if order is None else ("kept" if order.kept else list(order.sent)),
        "dropped": [] if order is None else list(order.dropped),
        "executor": executor.label if executor is not None and executor.strategy.runs_on(sent) else None,
        "rankings": rankings_of(context.applied, request.documents, unmovable=units),
        "body": sent.render() if steps else body,
    }


def _render_preview(preview: Mapping[str, Any]) -> str:
    lines = [
        f"format: {preview['format']}",
        f"documents: {preview['documents_found']}",
        f"strategy: {preview['strategy']}",
        f"order: {_order_line(preview)}",
    ]
    if preview["dropped"]:
        lines.append(f"dropped: {','.join(map(str, preview['dropped']))}")
    if preview["executor"]:
        lines.append(f"then: {preview['executor']} calls the model; shown is the body its calls start from")
    for ranking in preview["rankings"]:
        how = f"fell back ({ranking['fallback']}): the client's order" if ranking["fallback"] else "best first"
        margin = "" if ranking["margin"] is None else f", margin {ranking['margin']:.3f}"
        lines.append(f"ranking of {ranking['step']!r} by {ranking['ranker']}{margin}, {how}:")
        for scored in ranking["documents"]:
            lines.append(f"  rank {scored['rank']}: {_scored_unit(scored)}, score {scored['score']:.4g}")
    lines.append("body sent upstream:")
    lines.append(json.dumps(preview["body"], ensure_ascii=False, indent=2))
    return "\n".join(lines) + "\n"


def _order_line(preview: Mapping[str, Any]) -> str:
    """Where the documents went: their numbers in the order sent, `kept`, or why no order can be told."""
    order = preview["order"]
    if isinstance(order, str):
        return order
    if order is not None:
        return ",".join(map(str, order))
    if preview["documents_found"]:
        return "not told: a step sent text of its own in the documents' place (evidence, facts)"
    if preview["units_unmovable"]:
        units = preview["units_unmovable"]
        return f"none moved: the context's {units} units are a guess at its documents, read but never moved"
    return "none moved: no documents were found"


def _scored_unit(scored: Mapping[str, Any]) -> str:
    """What a ranking scored, as the client knows it."""
    if scored["document"] is not None:
        return f"document {scored['document']}"
    if scored["unit"] is not None:
        return f"unit {scored['unit']} of the context"
    return f"text an earlier step wrote (the {_ordinal(scored['place'])} it ranked)"


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"
