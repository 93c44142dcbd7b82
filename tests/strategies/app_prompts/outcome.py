"""What detection does with an app shape when its documents move: the code path of `contextlift detect --strategy
"reorder; order=promote"` (parse the body with the pipeline's shape, render it with the documents in a new order),
with the documents reversed so that any move is visible.

Outcomes:

- `intact`: documents were found, each is one whole unit the app wrote (label, tags and all), every unit is one of
  them, in the app's order; the question read is the user's (where a step that adds puts its block); after the
  move each unit is whole and contiguous in the body sent, in reversed order, and the text before the first unit
  and after the last, every other message and every other field, byte for byte.
- `declined`: no documents; the body is sent byte for byte.
- `preserved`: every original byte present in order, one block added (a strategy that only adds text).
- `wrong`: anything else: a unit cut or merged with another, text moved out of its place, a unit missed, an
  instruction or a unit's own line read as the question.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextlift.strategies import (
    ChatRequest,
    DeclaredFormat,
    DocumentLimits,
    build_registry,
    parse_request,
    parse_selection,
)
from tests.strategies.app_prompts.shape import AppShape

SELECTION = "reorder; order=promote"
OUTCOMES = ("intact", "declined", "preserved", "wrong")

Slot = tuple[int, int | None]
"""Where a text sits in a body: message index, and content-part index for a list of parts."""


@dataclass(frozen=True)
class Outcome:
    """One shape's outcome."""

    shape: str
    outcome: str
    """One of `OUTCOMES`."""
    detection: str
    """What detection reported (`X-Context-Format`)."""
    documents: int
    reason: str = ""
    """Why a shape is `wrong` (or what was noticed about an `intact` one)."""


def parse_as_detect_does(
    body: Mapping[str, Any],
    *,
    limits: DocumentLimits | None = None,
    declared: Sequence[DeclaredFormat] = (),
    caps: Mapping[str, float] | None = None,
) -> ChatRequest:
    """`parse_request` as `contextlift detect --strategy "reorder; order=promote"` calls it: with the shape the
    resolved pipeline names (none for this selection) and the proxy's limits and declared formats, when given."""
    pipeline = build_registry().resolve(parse_selection(SELECTION), caps or {})
    return parse_request(copy.deepcopy(dict(body)), limits, declared=declared, shape=pipeline.shape)


def shape_outcome(
    shape: AppShape,
    *,
    limits: DocumentLimits | None = None,
    declared: Sequence[DeclaredFormat] = (),
    caps: Mapping[str, float] | None = None,
) -> Outcome:
    """Parse the shape's body as `detect` does, move its documents into reversed order, render, and classify."""
    request = parse_as_detect_does(shape.body, limits=limits, declared=declared, caps=caps)
    found = len(request.documents)
    if not request.documents:
        sent = request.render()
        if sent == shape.body:
            return Outcome(shape.name, "declined", request.detection, 0)
        return Outcome(shape.name, "wrong", request.detection, 0, "no documents, yet the body sent differs")
    moved = request.with_documents(request.documents[::-1])
    sent = moved.render()
    reason = _why_not_intact(shape, request, moved, sent) or _why_not_the_question(shape, request)
    if not reason:
        renumbered = request.block is not None and request.block.numbering_base is not None
        return Outcome(shape.name, "intact", request.detection, found, "renumbered" if renumbered else "")
    if _one_block_added(shape.body, sent):
        return Outcome(shape.name, "preserved", request.detection, found)
    return Outcome(shape.name, "wrong", request.detection, found, reason)


def slot_texts(body: Mapping[str, Any]) -> dict[Slot, str]:
    """Every text of a body's messages: string contents, and the text of each text part."""
    texts: dict[Slot, str] = {}
    for i, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        if isinstance(content, str):
            texts[(i, None)] = content
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    texts[(i, j)] = part["text"]
    return texts


def _why_not_intact(shape: AppShape, request: ChatRequest, moved: ChatRequest, sent: Mapping[str, Any]) -> str:
    units = [unit.strip() for unit in shape.units]
    raws = [(document.raw or document.text).strip() for document in request.documents]
    if raws != units:
        whole = sum(raw in units for raw in raws)
        return f"{len(raws)} documents found, {whole} of them whole units; the app wrote {len(units)} units"
    if {k: v for k, v in sent.items() if k != "messages"} != {k: v for k, v in shape.body.items() if k != "messages"}:
        return "a field other than the messages changed"
    before, after = slot_texts(shape.body), slot_texts(sent)
    if before.keys() != after.keys():
        return "the messages' layout changed"
    spans = _unit_spans(before, units)
    for slot, text in before.items():
        inside = [(start, end) for (where, start, end) in spans if where == slot]
        if not inside:
            if after[slot] != text:
                return f"message {slot[0]} holds no document, yet it changed"
            continue
        start, end = inside[0][0], inside[-1][1]
        if not (after[slot].startswith(text[:start]) and after[slot].endswith(text[end:])):
            return f"the text around the documents of message {slot[0]} changed"
    return _reversed_whole(request, moved, after)


def _why_not_the_question(shape: AppShape, request: ChatRequest) -> str:
    """Why the question read is not the user's question, or "" where it is (the user's words, maybe with the
    template's own around them: a turn's text, a cue line's rest)."""
    asked = " ".join(shape.question.split())
    read = " ".join(request.question.split())
    if asked and asked in read:
        return ""
    return f"the question read is {request.question[:60]!r}, not the user's"


def _unit_spans(texts: Mapping[Slot, str], units: Sequence[str]) -> list[tuple[Slot, int, int]]:
    """Where each unit sits in the original body, searched in order (a unit after the one before it)."""
    slots = list(texts)
    spans: list[tuple[Slot, int, int]] = []
    current, cursor = 0, 0
    for unit in units:
        while current < len(slots):
            at = texts[slots[current]].find(unit, cursor)
            if at >= 0:
                spans.append((slots[current], at, at + len(unit)))
                cursor = at + len(unit)
                break
            current, cursor = current + 1, 0
        else:
            raise AssertionError(f"the fixture's unit is not in its body: {unit[:60]!r}")
    return spans


def _reversed_whole(request: ChatRequest, moved: ChatRequest, after: Mapping[Slot, str]) -> str:
    """Each document whole in the body sent (with its new number, where its format numbers documents), in the
    reversed order."""
    assert moved.block is not None
    base = moved.block.numbering_base
    slots = list(after)
    positions = []
    for position, document in enumerate(moved.documents):
        number = None if base is None else base + position
        written = document.rendered(number, moved.block.format).strip() if document.raw else document.text.strip()
        where = [(slots.index(slot), text.find(written)) for slot, text in after.items() if written in text]
        if not where:
            return f"document {len(request.documents) - position} is not whole in the body sent"
        positions.append(where[0])
    if positions != sorted(positions):
        return "the documents sent are not in the order they were moved to"
    return ""


def _one_block_added(body: Mapping[str, Any], sent: Mapping[str, Any]) -> bool:
    """Whether `sent` is `body` with one block of text added in one place, every original byte kept in order."""
    before, after = slot_texts(body), slot_texts(sent)
    if before.keys() != after.keys():
        return False
    grown = [slot for slot in before if before[slot] != after[slot]]
    if len(grown) != 1:
        return False
    old, new = before[grown[0]], after[grown[0]]
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    return len(new) > len(old) and new.endswith(old[prefix:])
