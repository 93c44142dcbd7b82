"""What detection made of a request, for a person debugging their prompt: the format found (or why none
was), the question, and each document with where it sits in the request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextlift.strategies.detection.declared import DeclaredFormat
from contextlift.strategies.detection.find import parse_request
from contextlift.strategies.detection.limits import DocumentLimits
from contextlift.strategies.request import ChatRequest
from contextlift.strategies.spans import DocumentFormat

PREVIEW_CHARS = 120
"""Characters of each document shown in the text report; the JSON report carries offsets, not texts."""
HINTS = {
    "none: no-context-region": (
        "no message holds documents in a format detection reads ({why}). To have documents read: send them in the "
        'body\'s documents field, wrap each in <doc>...</doc>, number them ("[1] ...", "Source 1:"), put them '
        'under a "Context:" line or in <context>...</context> with a separator line between chunks, or declare '
        "the template in document_formats."
    ),
    "none: no-question": (
        "documents were read, but no question outside them ({why}): with nothing to rank them by, nothing is "
        'moved. Ask in a later user turn, or after the documents on a "Question: ..." line.'
    ),
    "none: single-document": (
        "the context reads as one piece ({why}): there is nothing to reorder. If it holds several chunks, join them "
        'with a separator line ("\\n\\n---\\n\\n") or wrap each in <doc>...</doc>.'
    ),
    "none: ambiguous": (
        "labels or tags were found that, read further, prove no units ({why}): which of them are the documents is "
        "a guess, so nothing is moved. Keep one set of labels for the documents (a chunk's own quoted tags or "
        "numbered lines inside its text are fine once each chunk is wrapped), or name the shape with format=."
    ),
    "none: ambiguous-chunks": (
        "the context's units are separated by blank lines alone ({why}), and a retrieved chunk holds blank lines of "
        "its own: no boundary can be trusted, so nothing is moved. To make it readable, join the chunks with a "
        'separator line (e.g. "\\n\\n---\\n\\n"), open each with a line of its own ("Source: {source}"), wrap '
        'each in <doc>...</doc>, or, when each document is one paragraph, ask with "format=paragraphs" '
        "(X-Context-Strategy: reorder; format=paragraphs) or declare the template in document_formats "
        '({"name": "kb", "start": "...", "separator": "\\n\\n"}).'
    ),
    "none: unproven-boundaries": (
        "the context's chunks are told apart by a separator line, blank-line runs or headings, and they hold "
        "marked-up text ({why}): a page of Markdown writes the same marks inside a chunk, so a move could cut one "
        "in two, and nothing is moved (reorder and filter run the operator's unproven_fallback, excerpt by default). "
        'If these chunks never hold the separator themselves, say so with "format=separated" '
        "(X-Context-Strategy: reorder; format=separated); else wrap each chunk in <doc>...</doc>, number them "
        '("[1] ...", "Source 1:"), or declare the template in document_formats.'
    ),
    "none: unproven-template": (
        "the request is written in a RAG app's own template, and what lies between its sentences is not the units "
        "that template writes ({why}): a chunk that holds the app's label line could be cut in two, so nothing is "
        "moved. The template's sentences must each occur once, and each unit open with the app's label, numbered "
        "as the app numbers them; if the template was changed, declare it in document_formats."
    ),
    "none: non-text-parts": (
        "the documents are a message's text parts, with an image or other part between them ({why}): moving the "
        "text would part it from what it describes, so nothing is moved."
    ),
    "none: over-limit": (
        "the request is past what the proxy reads ({why}): it goes upstream as it came. Raise max_scanned_chars, "
        "max_documents or max_document_bytes if such requests are expected."
    ),
}
"""What a person can do about a reason detection gave, printed by `contextlift detect`; `{why}` is what in the
request made the reading a guess."""


def explain_detection(
    body: Mapping[str, Any],
    *,
    limits: DocumentLimits | None = None,
    declared: Sequence[DeclaredFormat] = (),
    shape: str | None = None,
) -> dict[str, Any]:
    """Detection's findings as a JSON-ready object: `format`, `question`, `instructions`, `message_index`,
    `part_index`, and per document its `title`, `span` ([start, end) in the message's text, or the message's
    index for per-message documents) and `text`.

    Raises:
        DocumentLimitError: the documents exceed `limits`.
    """
    request = parse_request(body, limits, declared=declared, shape=shape)
    block = request.block
    return {
        "format": request.detection,
        "hint": _hint(request),
        "documents_found": len(request.documents),
        "question": request.question,
        "instructions": request.instructions,
        "message_index": block.message_index if block else None,
        "part_index": block.part_index if block else None,
        "documents": [
            {"title": d.title, "span": span, "text": d.text}
            for d, span in zip(request.documents, _spans(request), strict=True)
        ],
    }


_GENERIC_WHY = {
    "none: no-context-region": "no tags, numbered labels, documents field or marked context region",
    "none: unproven-boundaries": "marked-up text",
    "none: ambiguous-chunks": "in the context region",
}


def _hint(request: ChatRequest) -> str | None:
    hint = HINTS.get(request.detection)
    if hint is None:
        return None
    if request.notes:
        why = request.notes[0]
    elif request.unmovable is not None and request.unmovable.notes:
        why = request.unmovable.notes[0]
    else:
        why = _GENERIC_WHY.get(request.detection, "as the request is written")
    return hint.replace("{why}", why)


def _spans(request: ChatRequest) -> list[list[int]]:
    block = request.block
    if block is None:
        return []
    if block.format is DocumentFormat.MESSAGES:
        return [[i, i + 1] for i in block.message_indices]
    if block.format is DocumentFormat.PARTS:
        content = request.body["messages"][block.message_index]["content"]
        texts = [i for i, p in enumerate(content) if isinstance(p, Mapping) and p.get("type") == "text"]
        return [[i, i + 1] for i in texts[:-1]]
    spans = []
    at = len(block.head)
    for position, document in enumerate(request.documents):
        end = at + len(document.raw)
        spans.append([at, end])
        if position < len(block.separators):
            at = end + len(block.separators[position])
    return spans


def render_explanation(found: Mapping[str, Any]) -> str:
    """The findings as lines a person reads."""
    lines = [f"format: {found['format']}", f"documents: {found['documents_found']}"]
    if found.get("hint"):
        lines.append(f"hint: {found['hint']}")
    if found["message_index"] is not None:
        where = f"message {found['message_index']}"
        if found["part_index"] is not None:
            where += f", part {found['part_index']}"
        lines.append(f"in: {where}")
    lines.append(f"question: {found['question']!r}")
    if found["instructions"]:
        lines.append(f"instructions: {_preview(found['instructions'])!r}")
    for number, document in enumerate(found["documents"], start=1):
        start, end = document["span"]
        title = f" title={document['title']!r}" if document["title"] else ""
        lines.append(f"  [{number}] span {start}:{end}{title} {_preview(document['text'])!r}")
    return "\n".join(lines) + "\n"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 3] + "..."
