"""What every scanner reports, and the rules they share for where a block of text ends.

A scanner finds the documents of one shape in a text and reports them as spans: offsets into that text, so
that rendering can reproduce every byte it did not move. The helpers here are linear in the text they read:
each pattern is anchored at a line start, or is a plain run of characters, and no position is searched twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum


class DocumentFormat(StrEnum):
    """How the documents of a request were written."""

    LITM = "litm"
    """Lost in the Middle: one `Document [i](Title: t) text` line per document."""
    XML = "xml"
    """`<document ...>`, `<doc ...>` or `<source ...>` elements."""
    HEADED = "headed"
    """Blocks opened by a `Document N:` line or a `## Document N` heading."""
    JSON_KV = "json-kv"
    """A JSON object of string records (the key-value retrieval task); each record is a document."""
    PARTS = "parts"
    """Separate text content parts of one message; the last text part is the question."""
    NUMBERED = "numbered"
    """Blocks opened by a numbered marker: `[1]`, `Source 1:`, `### Source 1`, `Retrieved chunk 1:` ..."""
    PARAGRAPHS = "paragraphs"
    """A marked context region (`Context:`, fences, `<context>`, a cue sentence) split at its blank lines: only
    where the request or the operator names this shape (each document is one paragraph)."""
    SEPARATED = "separated"
    """A marked context region whose chunks are told apart by a separator line (`---`, `***` ...), a run of blank
    lines, or a line that opens each of them (`Source: ...`, a Markdown heading); a chunk may hold blank lines."""
    METADATA = "metadata-blocks"
    """A marked context region whose documents each open with `key: value` metadata lines (LlamaIndex nodes)."""
    MESSAGES = "messages"
    """One document per message: consecutive tool results, or consecutive system messages of one shape."""
    JSON_LIST = "json-list"
    """A tool message holding a JSON list of results, each a string or an object with a text field."""
    DECLARED = "declared"
    """A template the operator declared in settings."""
    APP = "app"
    """Labelled units between the fixed sentences of a popular RAG app's own template (`strategies.detection.apps`)."""


@dataclass(frozen=True, slots=True)
class DocumentSpan:
    """One document found in a text, by offsets into that text."""

    start: int
    end: int
    text: str
    title: str | None = None
    number: int | None = None
    number_span: tuple[int, int] | None = None
    """Offsets of the positional number, relative to `start`; None where the number must not change (an app
    may map citations back to it)."""


Scanner = Callable[[str], Iterator[DocumentSpan]]

MAX_NUMBER_DIGITS = 9
"""A position has far fewer digits; a longer run is no position (and `int` refuses one past 4,300 digits)."""

NUMBERED_MARKER = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?P<marker>\[(?P<bracketed>\d{1,9})\]|[A-Za-z][A-Za-z ]{0,30}?[ \t]*#?[ \t]*\[?"
    r"(?P<named>\d{1,9})\]?)"
)
"""A numbered source's marker at a document's start, as the numbered shape reads it (`[3]`, `Source 3`, `### Source
3`, `**Passage 2**`): the marker as written (`marker`) and the number it shows (`bracketed` or `named`)."""
BLANK_LINE = re.compile(r"\n[ \t]*\n")
QUESTION_WORDS = (
    "question|query|user query|user question|your question|the question|user's question|my question(?:[ \t]+is)?"
)
"""What a heading or a bold line standing alone above the question says (`## Question`, `**User query**`)."""
QUESTION_HEADING = rf"^[ \t]*(?:#{{1,6}}[ \t]*(?:\*\*)?|\*\*)(?:{QUESTION_WORDS})(?:\*\*)?[ \t]*+:?(?:\*\*)?[ \t]*$"
"""A line that is only a heading naming the question (pattern text, multi-line mode): the question is below it.
A heading marker (`#`, `**`) is required: a bare `Question` line is as often a document's own word."""
_ANSWER_THE_QUESTION = (
    r"(?:(?:please|now|then|finally)[ \t,]+)*(?:answer|respond to|reply to|address)[ \t]+"
    r"(?:(?:the|this|that|my|our|a|each|following|user'?s|last|final|next|given|customer'?s)[ \t]+){0,4}"
    r"(?:question|query|request)s?\b"
)
QUESTION_INSTRUCTION = (
    r"^[ \t]*(?:\*\*)?(?:(?:using|based on|given|according to|with|from|considering)\b[^\n:,]{0,120}+,[ \t]*)?"
    rf"{_ANSWER_THE_QUESTION}[^\n:]{{0,200}}+:"
)
"""An instruction that names the question and ends in a colon, the question after it on the same line or below
it (`Answer the following question using only the context above: ...`, `Based on the sources, answer the
user's question:`); pattern text, case-insensitive multi-line mode. The possessive runs read each line once."""

# A line that opens what follows the documents: the question, the answer slot, or the next instruction.
# Only words a document's own lines rarely open with: `Q:`, `Input:` or `Task:` lines belong to FAQ and
# how-to documents as often as to the prompt, and would end the context inside one.
END_CUE = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:question|query|user query|user question|answer|helpful answer|"
    rf"final answer|instructions?)(?:\*\*)?[ \t]*:|^[ \t]*\[\[ ## [\w ]{{1,40}} ## \]\]|{QUESTION_HEADING}|"
    rf"{QUESTION_INSTRUCTION}"
)


_JSON_SPACE = re.compile(r"[ \t\r\n]*")


def skip_json_space(text: str, at: int) -> int:
    """The offset of the first character at or after `at` that is not JSON whitespace."""
    end = _JSON_SPACE.match(text, at)
    return end.end() if end else at


def position(digits: str) -> int | None:
    """The number a run of digits writes, None past `MAX_NUMBER_DIGITS`."""
    return int(digits) if len(digits) <= MAX_NUMBER_DIGITS else None


def paragraph_count(text: str) -> int:
    """How many blank-line separated paragraphs `text` holds (1 for text without a blank line)."""
    return sum(1 for _ in BLANK_LINE.finditer(text.strip())) + 1


def last_block_end(text: str, start: int, limit: int, paragraphs: int | None) -> int | None:
    """Where the last document that starts at `start` ends, or None when nothing tells.

    It ends before a line that opens the question or the answer (`Question:`, `Answer:` ...). Otherwise, when
    the documents before it held at most `paragraphs` paragraphs each, it holds no more than that many
    either: what follows is the question. A final paragraph ending in `?` is the question, never a document's.
    """
    cue = END_CUE.search(text, start, limit)
    end = _before_line(text, cue.start()) if cue else limit
    if paragraphs is None:
        return end if cue else None
    for seen, blank in enumerate(BLANK_LINE.finditer(text, start, end), start=1):
        if seen == paragraphs:
            return blank.start()
    last_blank = text.rfind("\n\n", start, end)
    if last_blank != -1 and text[start:end].rstrip().endswith("?"):
        return last_blank
    return end


def _before_line(text: str, line_start: int) -> int:
    """The offset before the line break (and blank lines) that precede `line_start`."""
    end = line_start
    while end > 0 and text[end - 1] in " \t\r\n":
        end -= 1
    return end


_LINE_BREAKS = str.maketrans(dict.fromkeys("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))


def render_litm_line(number: int, text: str, title: str | None) -> str:
    """One document in the Lost in the Middle format, on one line: the format is one line per document, and
    a line break in a title or text would let it write lines of its own into the prompt."""
    body = text.translate(_LINE_BREAKS)
    if title is None:
        return f"Document [{number}] {body}"
    return f"Document [{number}](Title: {title.translate(_LINE_BREAKS)}) {body}"
