"""`focus`: one sentence naming the most relevant document, placed just after the documents, every byte of the
client's context kept (Attention Instruction, Zhang et al. 2024, arXiv:2406.17095: telling the model which
document to attend to, by its index, helped where instructions about relative positions did not).

The document is named the way the client labelled it: its marker (`Document [6]`, `[3]`, `Source 2`), else its
title, else its opening words quoted. Nothing moves, so it also runs where a context was read but could not be
moved (`none: ambiguous-chunks`, a LangChain prompt of blank-line paragraphs): there the unit it quotes may be
part of a larger chunk, which a quotation does no harm to. The ranking is any ranker's (`ranker=`), and after
`filter` it names the best of what was kept.
"""

from __future__ import annotations

import re
from typing import ClassVar

from strategies.plugin import ChatRequest, Document, Param, Params, StepContext, Transform, rank, text_fits
from strategies.spans import DocumentFormat

QUOTED_WORDS = 12
"""Opening words quoted where a document has no label: enough to find it, few enough to add a line, not a copy."""
MAX_QUOTE_CHARS = 120
_MARKER_END = re.compile(r"[\]\)]")
# A numbered source's marker, as the numbered shape reads it: `[3]`, `Source 3`, `### Source 3`, `**Passage 2**`.
_NUMBERED_MARKER = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?P<marker>\[\d{1,9}\]|[A-Za-z][A-Za-z ]{0,30}?[ \t]*#?[ \t]*\[?\d{1,9}\]?)"
)


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
        context.note("focused=" + "+".join(str(i + 1) for i in chosen))
        focused = target.with_block_text(tail=f"\n\n{_sentence(labels)}{target.block.tail}")
        if target is request:
            return focused
        # Read but not movable: what goes on is the body with the sentence in it, and no documents at all.
        return ChatRequest(body=focused.render(), question=request.question, detection=request.detection)


def _sentence(labels: list[str]) -> str:
    if len(labels) == 1:
        return f"The most relevant document for the question is {labels[0]}."
    return f"The most relevant documents for the question are {', '.join(labels[:-1])} and {labels[-1]}."


def _label(document: Document, fmt: DocumentFormat, number: int | None) -> str:
    """How the client labelled the document: its marker, else its title, else its opening words."""
    if fmt is DocumentFormat.LITM and number is not None:
        return f"Document [{number}]"
    raw = document.raw
    if document.number_span is not None and fmt is not DocumentFormat.XML:
        _, end = document.number_span
        closing = _MARKER_END.match(raw, end)
        marker = raw[: closing.end() if closing else end].strip().lstrip("#* ").strip()
        if marker and "\n" not in marker and len(marker) <= 40:
            return marker
    if fmt is DocumentFormat.NUMBERED:
        # Numbers stay as the client wrote them (its citations map back to them): the marker names the source.
        numbered = _NUMBERED_MARKER.match(document.raw)
        if numbered is not None:
            return numbered.group("marker").strip()
    if document.title:
        return f'the one titled "{" ".join(document.title.split())[:MAX_QUOTE_CHARS]}"'
    words = document.text.split()
    opening = " ".join(words[:QUOTED_WORDS])[:MAX_QUOTE_CHARS]
    more = "..." if len(words) > QUOTED_WORDS or len(opening) == MAX_QUOTE_CHARS else ""
    return f'the one that begins "{opening}{more}"'
