"""`focus`: one sentence naming the most relevant document, placed just after the documents, every byte of the
client's context kept (Attention Instruction, Zhang et al. 2024, arXiv:2406.17095: telling the model which
document to attend to, by its index, helped where instructions about relative positions did not).

The document is named the way the client labelled it: its marker (`Document [6]`, `[3]`, `Source 2`), else its
title, else its opening words quoted. Nothing moves, so it also runs where a context was read but could not be
moved (`none: ambiguous-chunks`, a LangChain prompt of blank-line paragraphs): there the unit it quotes may be
part of a larger chunk, which a quotation does no harm to. The ranking is any ranker's (`ranker=`), and after
`filter` it names the best of what was kept.

The sentence is the proxy's own, and no document's text stands in it outside quotation marks: a marker is repeated
only where it reads as one (a word or two and a number); a title or opening words are quoted with what is not
printable (ESC, NUL, BEL, line breaks) as spaces and double quotes as single ones, so they cannot close the quote.
"""

from __future__ import annotations

import re
from typing import ClassVar

import anyio

from contextlift.strategies.plugin import ChatRequest, Document, Param, Params, StepContext, Transform, rank, text_fits
from contextlift.strategies.request import counted
from contextlift.strategies.spans import NUMBERED_MARKER, DocumentFormat

QUOTED_WORDS = 12
"""Opening words quoted where a document has no label: enough to find it, few enough to add a line, not a copy."""
MAX_QUOTE_CHARS = 120
_READ_CHARS = 8 * MAX_QUOTE_CHARS
"""Characters of a title or a document read for the label: enough for its quoted part after runs of spaces close."""
_MARKER_END = re.compile(r"[\]\)]")
# A marker as the proxy repeats it in its own sentence: a word or two and a number (`Document 6`, `[3]`, `Source 2`,
# `Retrieved chunk 1`); any other text before a document's number is the document's, and is not repeated unquoted.
_PLAIN_MARKER = re.compile(r"(?:[A-Za-z]{1,20}[ ]?){0,2}(?:#[ ]?)?\[?\d{1,9}\]?")
_DOUBLE_QUOTES = str.maketrans(dict.fromkeys('"\u201c\u201d\u201e\u201f\u2033\uff02', "'"))


class Focus(Transform):
    """Adds `The most relevant document for the question is X.` after the documents."""

    name: ClassVar[str] = "focus"
    ranks: ClassVar[bool] = True
    reads_unmovable: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        Param("top", int, 1, "how many of the most relevant documents the sentence names", minimum=1, maximum=5),
    )

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        target = request if request.documents else request.unmovable
        if target is None or target.block is None or not text_fits(target, context):
            return request
        ranking = await rank(target, params, context)
        chosen = ranking.order()[: int(params["top"])]
        base = target.block.numbering_base
        labels = [_label(target.documents[i], target.block.format, None if base is None else base + i) for i in chosen]
        context.note(f"focused{counted(request, target)}=" + "+".join(str(i + 1) for i in chosen))
        focused = target.with_block_text(tail=f"\n\n{_sentence(labels)}{target.block.tail}")
        if target is request:
            return focused
        # Read but not movable: what goes on is the body with the sentence in it, and no documents at all; the units
        # stay readable, the sentence beside them, for a later step that only adds text (`excerpt`). Copying the
        # prompt is CPU work in proportion to it: not on the event loop.
        body = await anyio.to_thread.run_sync(focused.render)
        return ChatRequest(body=body, question=request.question, detection=request.detection, unmovable=focused)


def _sentence(labels: list[str]) -> str:
    if len(labels) == 1:
        return f"The most relevant document for the question is {labels[0]}."
    return f"The most relevant documents for the question are {', '.join(labels[:-1])} and {labels[-1]}."


def _label(document: Document, fmt: DocumentFormat, number: int | None) -> str:
    """How the client labelled the document: its marker, else its title, else its opening words. A marker is taken
    only as a marker reads (a word or two and a number); a title or opening words are quoted, made plain first."""
    if fmt is DocumentFormat.LITM and number is not None:
        return f"Document [{number}]"
    raw = document.raw
    if document.number_span is not None and fmt is not DocumentFormat.XML:
        _, end = document.number_span
        closing = _MARKER_END.match(raw, end)
        marker = raw[: closing.end() if closing else end].strip().lstrip("#* ").strip()
        if _PLAIN_MARKER.fullmatch(marker):
            return marker
    if fmt is DocumentFormat.NUMBERED:
        # Numbers stay as the client wrote them (its citations map back to them): the marker names the source.
        numbered = NUMBERED_MARKER.match(document.raw)
        if numbered is not None and _PLAIN_MARKER.fullmatch(numbered.group("marker").strip()):
            return numbered.group("marker").strip()
    # Only what can be shown is read: a title or a document of megabytes costs what a short one does.
    title = _plain((document.title or "")[:_READ_CHARS])
    if title:
        return f'the one titled "{title[:MAX_QUOTE_CHARS]}"'
    words = document.text[:_READ_CHARS].split(maxsplit=QUOTED_WORDS)
    opening = _plain(" ".join(words[:QUOTED_WORDS]))[:MAX_QUOTE_CHARS]
    more = "..." if len(words) > QUOTED_WORDS or len(opening) == MAX_QUOTE_CHARS else ""
    return f'the one that begins "{opening}{more}"'


def _plain(text: str) -> str:
    """`text` fit to sit inside the proxy's own sentence: what is not printable (ESC, NUL, BEL, line breaks, bidi
    overrides) a space, runs of space one, and double quotes single ones, so that the sentence's quotation marks
    are the proxy's alone and a document's text cannot close them."""
    printable = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(printable.translate(_DOUBLE_QUOTES).split())
