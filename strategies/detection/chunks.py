"""Where one retrieved chunk ends and the next begins inside a context region.

Every text splitter (LangChain's RecursiveCharacterTextSplitter, LlamaIndex's SentenceSplitter ...) keeps the
blank lines between paragraphs inside a chunk, so a blank line is no boundary: a chunk of 1,000 characters
usually holds two or three paragraphs. A boundary is trusted only where something more marks it, from the
coarsest to the finest:

1. a separator line that the app put between chunks: `---`, `***`, `___`, `===`, `~~~`, `###`, `* * *`, the same
   line every time (LangChain apps' "\\n---\\n" or "\\n\\n---\\n\\n" joins); a rule exactly as long as the line
   above it is that line's title underline, inside a chunk, not a separator;
2. a run of two or more blank lines (a "\\n\\n\\n" join), where a chunk holds single blank lines at most;
3. a line that opens every chunk: the region's first line is `Source: ...`, `Title: ...`, `file_path: ...`, a
   Markdown heading, and the same kind of line opens each later chunk.

A chunk may hold blank lines, never a separator line. Where blank lines alone separate the units (LangChain's
default "\\n\\n" join, LlamaIndex without metadata, a `Context:` block of paragraphs), a chunk's own paragraph
break and the break between two chunks look the same: such a region raises `AmbiguousChunks`, and the request
is left as it came unless the request or the operator declares that each document is one paragraph
(`format=paragraphs`).

Every function reads the region once, line by line: linear in its size.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator
from typing import NamedTuple

from contextlift.strategies.detection.markdown import Enclosed, enclosed_ranges
from contextlift.strategies.spans import BLANK_LINE, DocumentSpan

# A line of one rule character, three or more (or `* * *` with spaces), alone on its line.
_SEPARATOR_LINE = re.compile(
    r"(?m)^[ \t]*(?P<rule>-{3,}|\*{3,}|_{3,}|={3,}|~{3,}|#{3,}|(?:\*[ \t]+){2,}\*|(?:-[ \t]+){2,}-)[ \t]*$"
)
_BLANK_RUN = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
"""Two or more blank lines in a row: a chunk keeps a paragraph break as one blank line."""
# `Source: a.pdf`, `Title: K2`, `file_path: /x.md`, `Document 3:`, `Chunk 2 -`: a short label and a colon.
_KEY_LINE = re.compile(r"[ \t]*(?P<key>[A-Za-z_][\w .\-/]{0,39}?)[ \t]*:(?:[ \t]|$)")
_HEADING_LINE = re.compile(r"[ \t]*(?P<key>#{1,6})[ \t]+\S")
_DIGITS = re.compile(r"\d+")
_COUNTING_WORDS = frozenset({
    "source", "sources", "document", "doc", "passage", "chunk", "result", "reference", "snippet", "excerpt",
    "context", "citation", "evidence", "article", "id", "search", "retrieved"
})  # fmt: skip
_COUNTED = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]+(?P<h>\d{1,9})[.):][ \t]|[A-Za-z][\w .\-/]{0,30}?[ \t]*#?\[?(?P<k>\d{1,9})\]?[ \t]*:"
    r"|[A-Za-z][\w .\-/]{0,30}?[ \t]*:[ \t]*\[?(?P<v>\d{1,9})\]?[ \t]*$)"
)
"""An opening label's counter: a numbered heading (`### 2. Title`), a label's number before its colon (`Source 2:`),
or a label whose whole value is the number (`Source ID: 2`)."""
_MARKUP = (
    (re.compile(r"(?m)^ {0,3}#{1,6}[ \t]+\S"), "a Markdown heading"),
    (re.compile(r"(?m)^ {0,3}>[ \t]"), "a Markdown quote"),
    (re.compile(r"(?m)^[ \t]*\|[^\n]*\|[ \t]*$"), "a Markdown table"),
)
"""What only marked-up source writes on a line of its own. Each is anchored at a line start and reads one line."""
_NOT_SPACE = re.compile(r"\S")
"""Searched from a line's end: it stops at the next character that is not a space, so a region of a thousand
`a:` paragraphs is not read again to the end for each of them."""
_MAX_KEY_WORDS = 4
"""A label has a few words (`Source`, `Retrieved from`); a sentence with a colon (`The answer is simple: ...`)
has more."""


class AmbiguousChunks(ValueError):
    """Blank lines alone separate the units of a region: no boundary there can be trusted."""


class UnprovenChunks(ValueError):
    """Chunks told apart by a mark that the chunks' own text could hold as well: the region holds marked-up
    source (a code fence, front matter, a heading, a title's underline, a quote or a table, or a separator line
    with other margins than the join's), and Markdown writes the same `---` rule, blank lines and headings inside
    a page. The reading is a guess: something may be added beside it, nothing moved."""

    def __init__(self, reason: str, chunks: list[DocumentSpan]) -> None:
        super().__init__(reason)
        self.chunks = chunks


class Chunks(NamedTuple):
    """A region's chunks, and what proved them where their marks alone did not: `counted` or `closed` labels
    (`label_proof`), else None."""

    spans: list[DocumentSpan]
    labels: str | None = None


def split_chunks(text: str, start: int, end: int) -> Chunks | None:
    """The chunks of `text[start:end]` told apart by a mark stronger than a blank line, or None where no such
    mark is found (one unit, or units told apart by nothing at all).

    Raises:
        AmbiguousChunks: marks that are not one consistent kind (two kinds of separator line, two separator
            lines in a row, separator lines and opening lines that disagree), or a region of several blank-line
            paragraphs and no stronger mark.
    """
    opened = _by_opening_lines(text, start, end)
    try:
        read = _read(text, start, end, opened)
    except (AmbiguousChunks, UnprovenChunks):
        labels = None if opened is None else label_proof(text, opened)
        if opened is not None and labels is not None:
            # Labels that count or close each unit say where it starts whatever marks its text holds (a splitter
            # cuts a code fence in two, and its `---` lines then seem to stand between chunks).
            return Chunks(opened, labels)
        raise
    return None if read is None else Chunks(read)


def _read(text: str, start: int, end: int, opened: list[DocumentSpan] | None) -> list[DocumentSpan] | None:
    # What the readings share, read once: the fences and front matter, and the separator lines outside them.
    enclosed = enclosed_ranges(text, start, end)
    rules = _rule_lines(text, start, end, enclosed)
    readings = (
        _by_separator_lines(text, start, end, rules),
        _by_blank_runs(text, start, end, rules),
        opened,
    )  # from the coarsest mark to the finest; where two find chunks, they must agree
    found = [f for f in readings if f is not None]
    if found:
        if any([s.start for s in other] != [s.start for s in found[0]] for other in found[1:]):
            # `---` lines in one place and `Source:` lines in another: one of them is inside a chunk.
            raise AmbiguousChunks("two kinds of mark that disagree on where chunks start")
        markup = _markup(text, start, end, found[0], enclosed)
        if markup is not None:
            raise UnprovenChunks(markup, found[0])
        return found[0]
    if BLANK_LINE.search(text, start, end) is not None:
        raise AmbiguousChunks("blank lines alone separate the units")
    return None


def _markup(text: str, start: int, end: int, chunks: list[DocumentSpan], enclosed: Enclosed) -> str | None:
    """What in the region shows marked-up source, whose pages hold their own rules, blank-line runs and headings;
    None for plain prose. Separator lines that the reading cut at must all stand alike (a blank line on the same
    sides): a `---` under a line of text is a Markdown title's underline, not the join `\n\n---\n\n`."""
    if enclosed:
        return "a code fence or front matter"
    for pattern, what in _MARKUP:
        if pattern.search(text, start, end) is not None:
            return what
    cuts = [(a.end, b.start) for a, b in itertools.pairwise(chunks)]
    if len({_margins(text, a, b) for a, b in cuts}) > 1:
        return "separators with other margins than the join's"
    joins = {_rule_text(text[a:b]) for a, b in cuts}
    cut_starts = [a for a, _ in cuts]
    for line in _SEPARATOR_LINE.finditer(text, start, end):
        at = bisect.bisect_right(cut_starts, line.start()) - 1
        at_a_cut = at >= 0 and line.start() < cuts[at][1]
        if underlines(text, start, line) and (at_a_cut or _rule(line) in joins):
            return "a title's underline of the join's own kind"
        if not at_a_cut and not underlines(text, start, line):
            return "a separator line inside a chunk"
    return None


def separator_line_in(text: str, start: int, end: int) -> bool:
    """Whether a separator line (`---`, `***` ...) that underlines no title stands in `text[start:end]`."""
    return any(not underlines(text, start, m) for m in _SEPARATOR_LINE.finditer(text, start, end))


def _margins(text: str, a: int, b: int) -> str:
    """The separator between two chunks with its rule taken out: where its blank lines stand."""
    return "".join("." if c.strip() else c for c in text[a:b]).replace("\t", " ")


def _rule_text(separator: str) -> str:
    return "".join(separator.split())


def _rule_lines(text: str, start: int, end: int, enclosed: Enclosed) -> list[re.Match[str]]:
    """The separator lines of `text[start:end]`, less the underlines of titles: a rule exactly as long as the
    line just above it is a heading's underline (reStructuredText and Markdown write `Title\n=====`), unless the
    same rule also stands where it underlines nothing (a join `---` after a chunk whose last line is `Yes`)."""
    lines = list(_SEPARATOR_LINE.finditer(text, start, end))
    if enclosed:
        # A `---` inside a code fence or front matter is the chunk's own text, whatever else the region holds.
        lines = [m for m in lines if not enclosed.covers(m.start())]
    joins = {_rule(m) for m in lines if not underlines(text, start, m)}
    return [m for m in lines if _rule(m) in joins]


def underlines(text: str, start: int, rule: re.Match[str]) -> bool:
    """Whether the rule line `rule` decorates a title, reading no further back than `start`: the underline of the
    line of text just above it, as long as that line or, of any length, with a blank line (or the text's end) below
    it (Markdown's setext headings, reStructuredText's titles). A join written straight under a chunk's last line
    has the next chunk's first line below it, never a blank one: chunks are stripped. (A reStructuredText overline
    is not told from a join above a one-line chunk: it stays a separator line, and a reading that cuts at it is a
    guess.)"""
    if rule.start() <= start:
        return False
    above_start = text.rfind("\n", start, rule.start() - 1) + 1
    above = text[max(above_start, start) : rule.start() - 1].strip()
    if not any(c.isalnum() for c in above):
        return False
    return len(above) == len(rule.group(0).strip()) or _blank_line_after(text, rule.end())


def _blank_line_after(text: str, line_end: int) -> bool:
    """Whether the line after the one ending at `line_end` is blank, or none follows."""
    if line_end >= len(text):
        return True
    next_end = text.find("\n", line_end + 1)
    return not text[line_end + 1 : len(text) if next_end == -1 else next_end].strip()


def _by_separator_lines(text: str, start: int, end: int, lines: list[re.Match[str]]) -> list[DocumentSpan] | None:
    if not lines:
        return None
    if len({_rule(m) for m in lines}) > 1:
        raise AmbiguousChunks("separator lines of more than one kind")
    pieces = _between(text, start, end, [(m.start(), m.end()) for m in lines])
    if pieces is None:
        raise AmbiguousChunks("two separator lines with nothing between them")
    if len(pieces) < 2:
        return None
    if len(lines) == 1 and any(BLANK_LINE.search(text, a, b) for a, b in pieces):
        # One rule between multi-paragraph units is as often a chunk's own horizontal rule as a join.
        raise AmbiguousChunks("one separator line between blank-line paragraphs")
    return [DocumentSpan(start=a, end=b, text=text[a:b]) for a, b in pieces]


def _rule(match: re.Match[str]) -> str:
    return "".join(match.group("rule").split())


def _by_blank_runs(text: str, start: int, end: int, rules: list[re.Match[str]]) -> list[DocumentSpan] | None:
    runs = [(m.start(), m.end()) for m in _BLANK_RUN.finditer(text, start, end)]
    if not runs or rules:
        # Blank runs around separator lines ("\n\n\n---\n\n\n") are the separators' margins: they decide.
        return None
    pieces = _between(text, start, end, runs)
    if pieces is None or len(pieces) < 2:
        return None
    return [DocumentSpan(start=a, end=b, text=text[a:b]) for a, b in pieces]


def _by_opening_lines(text: str, start: int, end: int) -> list[DocumentSpan] | None:
    """Chunks that each open with the same kind of line as the region's first: a label and a colon (digits
    aside: `Document 1:`, `Document 2:`) or a Markdown heading of one level. The line must open a paragraph
    (the region's start, or after a blank line): a label inside a chunk's paragraph stays with that chunk."""
    opens = _paragraph_starts(text, start, end)
    first = next(opens, None)
    if first is None:
        return None
    kind = _opening_kind(text, first, end)
    if kind is None:
        return None
    starts = [first, *(at for at in opens if _opening_kind(text, at, end) == kind)]
    if len(starts) < 2:
        return None
    spans = []
    for a, b in zip(starts, [*starts[1:], end], strict=True):
        piece = text[a:b].rstrip()
        spans.append(DocumentSpan(start=a, end=a + len(piece), text=piece))
    return spans


def label_proof(text: str, chunks: list[DocumentSpan]) -> str | None:
    """How the lines that open the chunks prove them, or None: `counted`, a counter that runs from 0 or 1 (`Source
    1:`, `Source 2:` ...; `### 1. Title`, `### 2. Title` ...); `closed`, a label line that closes every chunk and
    stands nowhere else in them (LangChain's `Content: ...` units, each closed by its `Source: ...` line). A chunk
    that holds a unit's label of its own breaks the count or the closing, and proves nothing."""
    numbers = [_counter(text, chunk.start) for chunk in chunks]
    first = numbers[0]
    if first is not None and first in (0, 1) and numbers == list(range(first, first + len(chunks))):
        # Numbered headings are a page's sections unless no heading above their level follows one of them: a
        # `## Decision` after `### 3. Proposal` closes the list, and what the last unit would hold is not its own.
        level = _HEADING_LINE.match(chunks[0].text)
        if level is not None and _above(text, chunks, len(level.group("key"))):
            return None
        return "counted"
    closing = {_closing_key(chunk.text) for chunk in chunks}
    if len(closing) != 1 or None in closing:
        return None
    key = closing.pop()
    assert key is not None
    label = re.compile(rf"(?im)^[ \t]*{re.escape(key)}[ \t]*:")
    # Once in each chunk, on its last line: a chunk that quotes the label elsewhere may hold a unit of its own.
    return "closed" if all(len(label.findall(chunk.text)) == 1 for chunk in chunks) else None


def _above(text: str, chunks: list[DocumentSpan], level: int) -> bool:
    """Whether a Markdown heading of `level` or above (fewer `#`) opens a line inside the chunks, other than their
    own first lines."""
    heading = re.compile(rf"(?m)^ {{0,3}}#{{1,{level}}}[ \t]+\S")
    return any(heading.search(text, chunk.start + 1, chunk.end) for chunk in chunks)


def _counter(text: str, at: int) -> int | None:
    """The number a chunk's opening label counts with (`Source 3:` 3, `### 2. Title` 2), or None. A label counts
    with a word of retrieved text (`Source`, `Document`, `Passage`, `Chunk`, `Result` ...): a tutorial's `Step 3:`
    and a story's `Chapter 3:` number a text's own parts."""
    line_end = text.find("\n", at)
    counted = _COUNTED.match(text[at : len(text) if line_end == -1 else line_end])
    if counted is None:
        return None
    if counted.group("h") is None and not _COUNTING_WORDS.intersection(counted.group(0).lower().split()):
        return None
    return int(counted.group("h") or counted.group("k") or counted.group("v"))


def _closing_key(chunk: str) -> str | None:
    """The key of a chunk's last line when it is a `Key: value` label of a word or two, else None."""
    last = chunk.rstrip().rsplit("\n", 1)[-1]
    key = _KEY_LINE.match(last)
    if key is None or len(key.group("key").split()) > 2 or not last[key.end() :].strip() or "\n" not in chunk:
        return None
    return key.group("key").strip()


def _paragraph_starts(text: str, start: int, end: int) -> Iterator[int]:
    at = start
    for blank in BLANK_LINE.finditer(text, start, end):
        yield from _first_non_blank(text, at, blank.start())
        at = blank.end()
    yield from _first_non_blank(text, at, end)


def _first_non_blank(text: str, start: int, end: int) -> Iterator[int]:
    piece = text[start:end]
    if piece.strip():
        yield start + len(piece) - len(piece.lstrip())


def _opening_kind(text: str, at: int, end: int) -> str | None:
    line_end = text.find("\n", at, end)
    line = text[at : end if line_end == -1 else line_end]
    heading = _HEADING_LINE.match(line)
    if heading is not None:
        return heading.group("key")
    key = _KEY_LINE.match(line)
    if key is None or len(key.group("key").split()) > _MAX_KEY_WORDS:
        return None
    if not line[key.end() :].strip() and (line_end == -1 or _NOT_SPACE.search(text, line_end, end) is None):
        return None  # a label with nothing after it or under it heads no chunk
    return _DIGITS.sub("#", key.group("key").lower())


def _between(text: str, start: int, end: int, cuts: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """The stripped non-empty pieces of `text[start:end]` between the cuts; None where a piece between two
    cuts is empty (an empty piece at either edge is the region's own margin)."""
    bounds = [start, *(x for cut in cuts for x in cut), end]
    pieces: list[tuple[int, int] | None] = []
    for a, b in zip(bounds[::2], bounds[1::2], strict=True):
        piece = text[a:b]
        core = piece.strip()
        if not core:
            pieces.append(None)
            continue
        offset = a + len(piece) - len(piece.lstrip())
        pieces.append((offset, offset + len(core)))
    inner = pieces[1:-1]
    if any(p is None for p in inner):
        return None
    return [p for p in pieces if p is not None]
