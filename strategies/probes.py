"""Positional probes built from a request's own documents: the positional benchmarks (Lost in the Middle's
gold-document positions, RULER's and NoLiMa's needles) replayed on what an app really sends.

A probe is a synthetic fact, a needle, written into one of the request's documents. Its names and its value are
made up here and occur nowhere in the request, so only the needle can answer the probe's question. Three kinds:

- `literal` (RULER's single needle): "The access code of Velmora Quintash is 4719305." asked as "What is the
  access code of Velmora Quintash?": the question repeats the needle's words.
- `one-hop` (NoLiMa's latent hop): "Velmora Quintash rents storage unit 4719305, a short walk from the
  Colosseum." asked as "What is the number of the storage unit Velmora Quintash rents in Rome?": the question
  names the city, the needle only a landmark in it, so the model must make the hop (a landmark and city that
  occur anywhere in the request are not used).
- `nolima` (NoLiMa's no-literal-match needle): "Velmora Quintash keeps the spare key in box 4719305, next to the
  Colosseum." asked as "Which number belongs to whoever has been to Rome?": the question shares no word with the
  needle but the stop words, so a ranker that matches words cannot find it; only one that makes the hop from Rome
  to the Colosseum does. Two other documents each gain a sentence about the needle's person and no number
  ("Velmora Quintash collects old maps of harbours."), as the hard regime's same-entity distractors: the model must
  tell the fact asked for from the person's other facts. The other two kinds repeat the needle's name in the
  question, so a lexical ranker always finds it: their lift is what a strategy wins with a ranker that never
  misses, this kind's what it wins where retrieval is hard.

The document holding the needle is placed first, in the middle and last among the others (kept in their order),
and the request's question is replaced by the probe's where the request asked it (after the documents, before
them, or in a later user turn), so the probe goes upstream in the request's own prompt shape, rendered by the
format detection found. A probe is scored by whether the answer holds its value (`probe_correct`).

Nothing here reads or writes beyond the request: the caller (shadow evaluation, the replay) decides what to do.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from contextlift.strategies.request import ChatRequest, Document, text_of
from contextlift.strategies.spans import DocumentFormat

KINDS = ("literal", "one-hop", "nolima")
RANKER_KIND = "nolima"
"""The kind whose question a ranker cannot match by its words: where a ranked strategy must not lose."""
FINDABLE_KINDS = ("literal", "one-hop")
"""The kinds whose question shares the needle's words: where a ranked strategy's lift must hold."""
KIND_WEIGHTS = (0.45, 0.45, 0.10)
"""How often each of KINDS is drawn. Real questions share a content word with the passage that answers them almost
always (NQ-Open 99.4%, SQuAD 2.0 dev 99.7%: docs/results/probe-mix), so the kinds a ranker can find come first; a
tenth are `nolima`, more than real traffic shows, so that a ranked step's loss where its ranker cannot find the
evidence has probes to be seen on."""
POSITIONS = ("first", "middle", "last")
PROBE_MAX_TOKENS = 64
"""A probe's answer is a number in a sentence: the request's own `max_tokens` is lowered to this where it is
higher, so a probe costs the prompt and little more."""

_SYLLABLES = (
    "ba", "cor", "dex", "fal", "gri", "hol", "jan", "kel", "lum", "mar", "nor", "pel", "quin", "ros", "sav", "tor",
    "ul", "vem", "wil", "xan", "yor", "zel", "bri", "cas", "dra", "fen", "gal", "hes", "ith", "kra", "lo", "mib",
)  # fmt: skip
_LANDMARKS = (
    ("Eiffel Tower", "Paris"),
    ("Colosseum", "Rome"),
    ("Big Ben", "London"),
    ("Brandenburg Gate", "Berlin"),
    ("Statue of Liberty", "New York"),
    ("Sydney Opera House", "Sydney"),
    ("Golden Gate Bridge", "San Francisco"),
    ("Acropolis", "Athens"),
    ("Sagrada Familia", "Barcelona"),
    ("Space Needle", "Seattle"),
    ("Kremlin", "Moscow"),
    ("Forbidden City", "Beijing"),
)
_ENTITY_FACTS = (
    "collects old maps of harbours",
    "once sang in a choir",
    "grows tomatoes on a balcony",
    "repairs bicycles at weekends",
)
"""What the `nolima` distractors say of the needle's person: no number, no place, no word of the question."""
_DIGITS = re.compile(r"\d")
_TRIES = 64
"""Draws of a fresh name or value before giving up (a request made of digits leaves no fresh number)."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One needle and its question, for one request."""

    kind: Literal["literal", "one-hop", "nolima"]
    needle: str
    question: str
    value: str
    """What a right answer holds: a seven-digit number found nowhere in the request."""
    document: int
    """The request's document the needle was written into (its index in the request's own order)."""
    distractors: tuple[tuple[int, str], ...] = ()
    """Sentences written into other documents (index, sentence): about the needle's person, without its answer."""


@dataclass(frozen=True, slots=True)
class PlacedProbe:
    """The probe's request with the needle's document at one position."""

    position: str
    """`first`, `middle` or `last`."""
    index: int
    """The needle's document's index among the documents sent (0-based)."""
    request: ChatRequest


def make_probe(request: ChatRequest, seed: int, kind: str | None = None) -> Probe | None:
    """A probe for `request` (its kind drawn from the seed unless given), or None when the request has fewer than
    three documents, no question, or no document the needle can be written into without changing how it renders.
    """
    if len(request.documents) < 3 or not request.question.strip() or request.block is None:
        return None
    rng = random.Random(seed)
    chosen = kind or rng.choices(KINDS, weights=KIND_WEIGHTS)[0]
    seen = _seen_text(request)
    writable = [i for i, d in enumerate(request.documents) if _with_needle(d, "x", request.block.format) is not None]
    if not writable:
        return None
    document = rng.choice(writable)
    name = _fresh_name(rng, seen)
    value = _fresh_value(rng, seen)
    if name is None or value is None:
        return None
    if chosen == "literal":
        return Probe("literal", f"The access code of {name} is {value}.",
                     f"What is the access code of {name}?", value, document)  # fmt: skip
    unused = [(landmark, city) for landmark, city in _LANDMARKS if landmark.lower() not in seen
              and city.lower() not in seen]  # fmt: skip
    if chosen == "nolima":
        # The city's words must not be the landmark's (Sydney Opera House, Sydney): the question would share them.
        unused = [(landmark, city) for landmark, city in unused if not set(landmark.split()) & set(city.split())]
    if not unused:
        return None
    landmark, city = rng.choice(unused)
    if chosen == "nolima":
        others = [i for i in writable if i != document]
        if len(others) < 2:
            return None
        distractors = tuple(
            (i, f"{name} {fact}.") for i, fact in zip(rng.sample(others, 2), rng.sample(_ENTITY_FACTS, 2), strict=True)
        )
        needle = f"{name} keeps the spare key in box {value}, next to the {landmark}."
        return Probe("nolima", needle, f"Which number belongs to whoever has been to {city}?", value, document,
                     distractors)  # fmt: skip
    return Probe(
        "one-hop",
        f"{name} rents storage unit {value}, a short walk from the {landmark}.",
        f"What is the number of the storage unit {name} rents in {city}?",
        value,
        document,
    )


def place_probe(request: ChatRequest, probe: Probe, max_tokens: int = PROBE_MAX_TOKENS) -> list[PlacedProbe]:
    """The probe's request with its needle's document first, in the middle and last; [] when the question cannot
    be replaced where the request asked it."""
    assert request.block is not None
    asked = _asking(request, probe.question)
    if asked is None:
        return []
    asked = _numbered_in_sequence(replace(asked, body=_capped(asked.body, max_tokens), question=probe.question))
    holder = _with_needle(asked.documents[probe.document], probe.needle, request.block.format)
    if holder is None:
        return []
    documents = list(asked.documents)
    for index, sentence in probe.distractors:
        written = _with_needle(documents[index], sentence, request.block.format)
        if written is None:
            return []
        documents[index] = written
    others = [d for i, d in enumerate(documents) if i != probe.document]
    placed = []
    for position, index in zip(POSITIONS, (0, len(others) // 2, len(others)), strict=True):
        documents = [*others[:index], holder, *others[index:]]
        placed.append(PlacedProbe(position, index, asked.with_documents(documents)))
    return placed


def probe_correct(answer: str, value: str) -> bool:
    """Whether the answer holds the probe's value (its digits in a row; a thousands separator or space between
    them is allowed, other digits around them are not)."""
    pattern = r"(?<!\d)" + r"[ ,.\u202f]?".join(re.escape(d) for d in value) + r"(?!\d)"
    return re.search(pattern, answer) is not None


def _seen_text(request: ChatRequest) -> str:
    """Everything the request says, lowercased: a made-up name or value must occur nowhere in it."""
    parts = [text_of(m) for m in request.messages if isinstance(m, Mapping)]
    parts += [d.text for d in request.documents]
    return "\n".join(parts).lower()


def _fresh_name(rng: random.Random, seen: str) -> str | None:
    for _ in range(_TRIES):
        first = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        last = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
        if first.lower() not in seen and last.lower() not in seen:
            return f"{first} {last}"
    return None


def _fresh_value(rng: random.Random, seen: str) -> str | None:
    """Seven digits found nowhere in the request, not even across the digits of neighbouring numbers."""
    digits = "".join(_DIGITS.findall(seen))
    for _ in range(_TRIES):
        value = str(rng.randint(1_000_000, 9_999_999))
        if value not in digits:
            return value
    return None


def _with_needle(document: Document, needle: str, fmt: DocumentFormat) -> Document | None:
    """The document with the needle written after its text, rendered as the request renders it: in its raw form
    right after the text (so a title, a number, a closing mark stay around it), or as its text where it has no
    raw form. None where the text cannot be found in the raw form: a document this cannot write into unseen."""
    text = f"{document.text.rstrip()} {needle}"
    if not document.raw or fmt is DocumentFormat.MESSAGES:
        # A document that is a message or a content part renders from its text (a message's raw form is its own
        # content; dropped so the new text is what goes).
        return replace(document, text=text, raw="")
    stripped = document.text.rstrip()
    if not stripped.strip():
        return None
    # The text as written, or JSON-escaped as a JSON string holds it (the needle is plain ASCII: it needs none).
    for written in dict.fromkeys(
        (stripped, json.dumps(stripped)[1:-1], json.dumps(stripped, ensure_ascii=False)[1:-1])
    ):
        at = document.raw.rfind(written)
        if at >= 0:
            break
    else:
        return None
    end = at + len(written)
    raw = f"{document.raw[:end]} {needle}{document.raw[end:]}"
    span = document.number_span
    if span is not None and span[0] >= end:
        span = (span[0] + len(needle) + 1, span[1] + len(needle) + 1)
    return replace(document, text=text, raw=raw, number_span=span)


_LABEL_NUMBER = re.compile(r"\d{1,4}")


def _numbered_in_sequence(request: ChatRequest) -> ChatRequest:
    """Documents labelled 1, 2, 3 ... in their order (`[1]`, `Source 1:`, `Retrieved chunk 1`) whose labels
    detection keeps as they are (they are citation ids a strategy must not change): for a probe, where the needle's
    document moves, they are renumbered by position, so the probe reads as the app numbers its documents."""
    block = request.block
    if block is None or block.numbering_base is not None or not block.takes_text:
        return request
    found = [_LABEL_NUMBER.search(d.raw[:40]) if d.raw else None for d in request.documents]
    numbers = [int(m.group()) if m else None for m in found]
    start = numbers[0]
    if start is None or numbers != list(range(start, start + len(numbers))):
        return request
    documents = [replace(d, number_span=m.span()) for d, m in zip(request.documents, found, strict=True) if m]
    return replace(request, documents=tuple(documents), block=replace(block, numbering_base=start))


def _asking(request: ChatRequest, question: str) -> ChatRequest | None:
    """The request with its question replaced by `question` where it was asked: after the documents, before
    them, or in a later user turn (the last place it occurs wins)."""
    asked = request.question.strip()
    block = request.block
    assert block is not None
    if asked in block.tail:
        return request.with_block_text(tail=_replace_last(block.tail, asked, question))
    if asked in block.head:
        return request.with_block_text(head=_replace_last(block.head, asked, question))
    taken = {block.message_index, *block.message_indices}
    messages = list(request.body["messages"])
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if i in taken or not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = _content_asking(message.get("content"), asked, question)
        if content is not None:
            messages[i] = {**message, "content": content}
            return replace(request, body={**request.body, "messages": messages})
    return None


def _content_asking(content: Any, asked: str, question: str) -> Any:
    if isinstance(content, str):
        return _replace_last(content, asked, question) if asked in content else None
    if isinstance(content, list):
        for j in range(len(content) - 1, -1, -1):
            part = content[j]
            if isinstance(part, Mapping) and isinstance(part.get("text"), str) and asked in part["text"]:
                return [*content[:j], {**part, "text": _replace_last(part["text"], asked, question)}, *content[j + 1 :]]
    return None


def _replace_last(text: str, old: str, new: str) -> str:
    at = text.rfind(old)
    return text[:at] + new + text[at + len(old) :]


def _capped(body: Mapping[str, Any], most: int) -> dict[str, Any]:
    """The body with its answer-length fields lowered to `most` where they are higher (none is added)."""
    out = dict(body)
    for key in ("max_tokens", "max_completion_tokens"):
        value = out.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > most:
            out[key] = most
    return out
