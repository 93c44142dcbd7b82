"""Context regions: the part of a prompt that an app marked as its retrieved context, split into documents.

Real RAG stacks rarely number their documents. They mark where the context goes and join the documents with
their own separator:

- LangChain's stuff chains: a cue sentence (`Use the following pieces of retrieved context ...`) or a
  `----------------` fence, then `page_content`s joined by blank lines;
- LlamaIndex: `Context information is below.` between two `---------------------` fences, each node as
  `key: value` metadata lines, a blank line and its text; its citation engine's `Source N:` blocks inside
  `------` fences; its context chat engine's `Here are the relevant documents for the context:`;
- hand-written apps: `Context:` labels, `<context>` wrappers, `### Context` headings.

A region is found by one of these markers; its documents are, in order of preference, the items of a JSON list
(DSPy's `list[str]` fields), XML document elements, blocks opened by `key: value` metadata lines, numbered
markers, or chunks told apart by a separator line, a run of blank lines or a line that opens each of them
(`contextlift.strategies.detection.chunks`; a blank line alone is no boundary). The region ends at
its closing marker, at a line that opens the question or answer (`Question:`, `Query:`, `Answer:` ...), or at
the end of the text. Whether the documents count is for the caller to judge (how many, and a question found
outside the region); this module only reports what the text says.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from contextlift.strategies.detection.chunks import separator_line_in, split_chunks, underlines
from contextlift.strategies.detection.formats import AmbiguousElements, scan_xml
from contextlift.strategies.detection.message_documents import scan_json_list
from contextlift.strategies.detection.numbered import scan_numbered
from contextlift.strategies.spans import BLANK_LINE, END_CUE, DocumentFormat, DocumentSpan

_WRAPPER_TAGS = "context|documents|sources|search_results|retrieved_documents|retrieved_context|knowledge|passages"
_WRAPPER = re.compile(rf"<(?P<tag>{_WRAPPER_TAGS})(?:[ \t][^<>\n]{{0,200}})?>", re.IGNORECASE)
# A line of five or more of one rule character: LangChain's 16 dashes, LlamaIndex's 21 and its citation's 6.
# Markdown's `---` rule is shorter, so notes with horizontal rules are not read as fenced context.
_FENCE = re.compile(r"(?m)^[ \t]*(?:-{5,}|={5,}|\*{5,}|_{5,}|~{5,})[ \t]*$")
_LABEL = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:context|contexts|context information|documents|retrieved documents|"
    r"retrieved context|relevant documents|relevant context|sources|search results|passages|retrieved passages|"
    r"knowledge|background information)(?:\*\*)?[ \t]*(?::[ \t]*(?:\*\*)?|(?=\n))"
    # DSPy's ChatAdapter opens each input field with a `[[ ## name ## ]]` line.
    r"|^[ \t]*\[\[ ## (?:context|contexts|documents|passages|sources|search_results) ## \]\][ \t]*\n"
)
# A sentence that announces the context: LangChain's `the following pieces of retrieved context`, LlamaIndex's
# `Here are the relevant documents for the context:`, `The documents below ...`.
_PLURALS = "documents|passages|sources|excerpts|snippets|search results"
_FOLLOWING = (
    r"the following (?:pieces of |retrieved |relevant |search )*(?:context|documents|passages|sources|"
    r"search results|excerpts|snippets"
)
_CUE = re.compile(rf"(?i)\b(?:{_FOLLOWING}|articles)|(?:{_PLURALS}) (?:for the context|below)|context (?:is )?below)\b")
# What announces a fenced context: LangChain's `the following pieces of context`, LlamaIndex's `Context
# information is below` and `sources of information`. A bare word is not enough: `Source code:`, `For context,
# I'm a student` and `Keep the context of the conversation` sit above fences too.
_FENCE_CUE = re.compile(
    rf"(?i)\b(?:context information|sources of information|retrieved (?:context|documents|passages)|"
    rf"{_FOLLOWING})|(?:{_PLURALS}) below|context (?:is )?below)\b"
)
_EMPTY_ANSWER = re.compile(r"(?i)\s*+(?:final answer|helpful answer|answer)[ \t]*+:\s*+")
_QUESTION_LINE = re.compile(r"(?i)[ \t]*(?:question|query)[ \t]*:[ \t]*\S[^\n]*")
_CUE_WINDOW = 400
"""Characters above a fence searched for a cue: the sentence that announces the context, maybe with an
instruction line between it and the fence."""
# Keys are identifiers (`file_name`, `page_label`): prose such as `Club ownership structure: 75%` is text.
_METADATA_LINE = re.compile(r"[A-Za-z_][\w.\-/]{0,40}: \S[^\n]*")
_MAX_METADATA_LINES = 40


class RegionTooLarge(ValueError):
    """A region of more pieces than any request may carry documents: no evidence of documents."""


class Split(NamedTuple):
    """A region's documents: how they were told apart, the spans, and the labels that proved chunks whose marks
    alone did not (`chunks.label_proof`)."""

    format: DocumentFormat
    spans: list[DocumentSpan]
    labels: str | None = None


@dataclass(frozen=True, slots=True)
class Region:
    """Where a marked context starts and ends in a text, and what marked it."""

    start: int
    end: int
    marker: str
    """`wrapper`, `fence`, `label` or `cue`: reported with the format, for users debugging their prompt."""


def find_region(text: str) -> Region | None:
    """The first marked context region of `text`, by the strongest marker present."""
    return _wrapped(text) or _fenced(text) or _asked_and_answered(text) or _labelled(text) or _announced(text)


def split_region(text: str, region: Region, most: int | None = None, *, one_paragraph_each: bool = False) -> Split:
    """The documents of a region and how they were told apart; at most `most` of them are built.

    Args:
        one_paragraph_each: the request or the operator says each document is one paragraph (`format=paragraphs`):
            blank lines are then boundaries. Otherwise a blank line alone never is (`strategies.detection.chunks`).

    Raises:
        AmbiguousNumbering: numbered markers in the region that are not one list.
        AmbiguousChunks: blank lines alone separate the region's units.
        RegionTooLarge: more paragraphs than four times `most`: too many pieces to be documents.
    """
    items = scan_json_list(text[region.start : region.end])
    if items:
        return Split(DocumentFormat.JSON_LIST, [_shifted(s, region.start) for s in items])
    try:
        xml = list(itertools.islice(scan_xml(text[region.start : region.end]), most))
    except AmbiguousElements:
        xml = []
    if xml and (
        text[region.start : region.start + xml[0].start].strip()
        or separator_line_in(text, region.start + xml[-1].end, region.end)
    ):
        xml = []  # elements quoted inside one of the region's chunks, with its text before them or a join after
    if xml:
        return Split(DocumentFormat.XML, [_shifted(s, region.start) for s in xml])
    cap = None if most is None else 4 * most
    paragraphs = list(itertools.islice(_paragraphs(text, region.start, region.end), cap))
    if cap is not None and len(paragraphs) >= cap:
        raise RegionTooLarge(f"more than {cap} paragraphs")
    # Before numbered markers: LlamaIndex's citation engine writes each node's metadata lines above its
    # `Source N:` marker, and a split at the markers would give every title to the document before it.
    blocks = _metadata_blocks(text, paragraphs)
    if blocks:
        return Split(DocumentFormat.METADATA, blocks)
    numbered = list(itertools.islice(scan_numbered(text, region.start, region.end), most))
    if (
        numbered
        and not text[region.start : numbered[0].start].strip()
        and not text[numbered[-1].end : region.end].strip()
    ):
        # The markers open and close the region; markers that cover less are a document's own list.
        return Split(DocumentFormat.NUMBERED, numbered)
    if not one_paragraph_each:
        chunks = split_chunks(text, region.start, region.end)
        if chunks is not None:
            spans = chunks.spans[: len(chunks.spans) if most is None else most]
            return Split(DocumentFormat.SEPARATED, spans, chunks.labels)
    return Split(DocumentFormat.PARAGRAPHS, [DocumentSpan(start=a, end=b, text=text[a:b]) for a, b in paragraphs])


def _wrapped(text: str) -> Region | None:
    # A tag whose closing is missing after one opening is missing after every later one too: searched once.
    unclosed: set[str] = set()
    opening = _WRAPPER.search(text)
    while opening is not None:
        tag = opening.group("tag").lower()
        if tag not in unclosed:
            closing = re.compile(rf"</{tag}\s*>", re.IGNORECASE).search(text, opening.end())
            if closing is not None:
                return Region(opening.end(), closing.start(), "wrapper")
            unclosed.add(tag)
        opening = _WRAPPER.search(text, opening.end())
    return None


def _fenced(text: str) -> Region | None:
    """The text after the first fence that a context cue announces, up to the same fence again (a different
    rule inside a document does not close it), else to a question cue or the end. Without the cue, a fence is
    a heading's underline or a note's separator: `Introduction\n------------` is no context."""
    searched_to = 0
    for fence in _FENCE.finditer(text):
        if underlines(text, searched_to, fence):
            continue  # `Title\n*****`: a heading inside the text, whatever announces a context above it
        # Each window starts where the last one ended: the text above a run of fences is read once in all.
        announced = _announces_context(text, max(searched_to, fence.start() - _CUE_WINDOW), fence.start())
        searched_to = fence.end()
        if not announced:
            continue
        line = fence.group(0).strip()
        closing = re.compile(rf"(?m)^[ \t]*{re.escape(line)}[ \t]*$").search(text, fence.end())
        if closing is not None:
            return Region(fence.end(), closing.start(), "fence")
        return Region(fence.end(), _cue_or_end(text, fence.end()), "fence")
    return None


def _asked_and_answered(text: str) -> Region | None:
    """The text between the last two fence lines alike, where a question line stands just above the first and
    nothing but an empty answer slot follows the second (LangChain's qa_with_sources prompt: `QUESTION: ...`, the
    sources between `=========` lines, `FINAL ANSWER:`). Its worked examples before it are fenced the same way,
    each with an answer written after it: only the last block, whose answer the model writes, is the context."""
    fences = list(_FENCE.finditer(text))
    if len(fences) < 2 or not _EMPTY_ANSWER.fullmatch(text, fences[-1].end()):
        return None
    closing = fences[-1]
    opening = next((f for f in reversed(fences[:-1]) if f.group(0).strip() == closing.group(0).strip()), None)
    if opening is None:
        return None
    above_start = text.rfind("\n", 0, max(opening.start() - 1, 0)) + 1
    if not _QUESTION_LINE.fullmatch(text, above_start, max(opening.start() - 1, above_start)):
        return None
    return Region(opening.end(), closing.start(), "fence")


def _announces_context(text: str, window_start: int, fence_start: int) -> bool:
    """Whether the text just above a fence announces a context: LangChain's `Use the following pieces of
    context ...`, LlamaIndex's `Context information is below.`, its citation engine's `Below are several
    numbered sources of information:`."""
    return _FENCE_CUE.search(text, window_start, fence_start) is not None


def _labelled(text: str) -> Region | None:
    label = _LABEL.search(text)
    if label is None:
        return None
    return Region(label.end(), _cue_or_end(text, label.end()), "label")


def _announced(text: str) -> Region | None:
    cue = _CUE.search(text)
    if cue is None:
        return None
    # The documents start at the paragraph after the cue's own, or on the line after a cue ending in a colon.
    line_end = text.find("\n", cue.end())
    if line_end == -1:
        return None
    blank = BLANK_LINE.search(text, cue.end())
    colon_line = text[cue.end() : line_end].rstrip().endswith(":")
    start = line_end + 1 if colon_line or blank is None else blank.end()
    return Region(start, _cue_or_end(text, start), "cue")


def _cue_or_end(text: str, start: int) -> int:
    cue = END_CUE.search(text, start)
    return cue.start() if cue else len(text)


def _paragraphs(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Offsets of the non-blank paragraphs of `text[start:end]`, each without its surrounding whitespace."""
    at = start
    for blank in BLANK_LINE.finditer(text, start, end):
        yield from _stripped(text, at, blank.start())
        at = blank.end()
    yield from _stripped(text, at, end)


def _stripped(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    piece = text[start:end]
    core = piece.strip()
    if core:
        offset = start + len(piece) - len(piece.lstrip())
        yield offset, offset + len(core)


def _metadata_blocks(text: str, paragraphs: list[tuple[int, int]]) -> list[DocumentSpan]:
    """Documents that each open with a paragraph of `key: value` lines after a paragraph of text (LlamaIndex
    renders a node as its metadata, a blank line, then its text). The region must open with such a paragraph,
    and a later one opens a document when its first key is the region's first key: a `Date: ...` paragraph
    inside a node's text is the node's. (Nodes from readers with other first keys stay with the node before
    them: coarser, never wrong about where text belongs.)"""
    keys = [_metadata_key(text, a, b) for a, b in paragraphs]
    if not keys or keys[0] is None:
        return []
    starts = [i for i, key in enumerate(keys) if key == keys[0]]
    if len(starts) < 2:
        return []
    ends = [*starts[1:], len(paragraphs)]
    spans = []
    for i, j in zip(starts, ends, strict=True):
        start, end = paragraphs[i][0], paragraphs[j - 1][1]
        spans.append(DocumentSpan(start=start, end=end, text=text[start:end]))
    return spans


def _metadata_key(text: str, start: int, end: int) -> str | None:
    """The first key of a paragraph made only of `key: value` lines, else None."""
    lines = text[start:end].split("\n", _MAX_METADATA_LINES)
    if len(lines) > _MAX_METADATA_LINES or not all(_METADATA_LINE.fullmatch(line.rstrip()) for line in lines):
        return None
    return lines[0].split(":", 1)[0]


def _shifted(span: DocumentSpan, offset: int) -> DocumentSpan:
    return DocumentSpan(
        start=span.start + offset,
        end=span.end + offset,
        text=span.text,
        title=span.title,
        number=span.number,
        number_span=span.number_span,
    )
