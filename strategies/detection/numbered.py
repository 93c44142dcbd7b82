"""Documents opened by numbered markers: `[1] ...`, `Source 1:`, `### Source 1`, `Retrieved chunk 1:`,
`Passage 2.` and the like, as RAG apps and DSPy (`[1] «...»`) write them.

Evidence: at least two markers, all of one kind (the same word, or all bracketed), numbered consecutively from
0 or 1. Markers that restart or skip are two lists (an instruction's example beside the real sources), and the
text is left alone. The numbers stay as written when documents move: an app that cites `[3]` maps it back to
its third source, so renumbering would break its citations.

In a system prompt numbered lines are rules as often as sources; there they count only when the paragraph just
above them announces sources (`announces_sources`), as search apps write it: `Use these search results and cite
them as [n].`
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from contextlift.strategies.spans import DocumentSpan, last_block_end, paragraph_count, position

WORDS = (
    "source|sources|document|doc|passage|chunk|retrieved chunk|retrieved document|result|search result|snippet|"
    "excerpt|reference|context|article|evidence"
)
"""The words a numbered document marker may use (alternatives of a pattern)."""
# Anchored at a line start, and no two blank runs can take the same blanks (`[ \t]*#?[ \t]*` made a line of
# 32,000 blanks after a marker word cost 16 s): each attempt reads its line once.
_MARKER = re.compile(
    rf"(?im)^[ \t]*(?:#{{1,6}}[ \t]*)?(?:\*\*)?(?:(?P<word>{WORDS})[ \t]*(?:#[ \t]*)?\[?(?P<n1>\d{{1,12}})\]?"
    r"(?:\*\*)?[ \t]*(?:[:.)]|(?=\n)|$)|\[(?P<n2>\d{1,12})\](?:\*\*)?[ \t])"
)


_SOURCES = (
    r"(?:search results|web results|retrieved results|sources|documents|passages|snippets|excerpts|articles|"
    r"references|contexts?|chunks|pages)"
)
# `these search results`, `the following sources`, `the provided documents`, `sources below`, `cite them as [n]`.
# A document noun alone is not enough: `Never reveal your sources.` or `questions about the documents the user
# uploads` sit above numbered rules too.
_ANNOUNCEMENT = re.compile(
    r"(?i)\b(?:these|the following|following|the provided|provided|the given|given|the retrieved|retrieved|"
    r"the numbered|numbered|the attached|attached|the below|below)[ \t]+(?:(?:web|search|retrieved|relevant|"
    rf"numbered|provided|top)[ \t]+)*{_SOURCES}\b|\b{_SOURCES}[ \t]+(?:are[ \t]+)?(?:below|listed below|"
    r"that follow)\b|\[(?:n|num|number|index|source|source number|citation|citation number)\]"
)
# What the lines are when the paragraph names them after its announcement: `Cite the retrieved documents as [n].
# Follow these rules:`.
_NOT_SOURCES = re.compile(r"(?i)\b(?:rules?|guidelines?|instructions?|steps?|requirements?|constraints?|policies)\b")
_ANNOUNCEMENT_WINDOW = 600
"""Characters above the first marker read for the announcement: its paragraph, not the whole prompt."""


def announces_sources(text: str, first_marker: int) -> bool:
    """Whether the paragraph just above the first numbered marker at `first_marker` announces sources."""
    window = text[max(0, first_marker - _ANNOUNCEMENT_WINDOW) : first_marker].rstrip()
    blank = window.rfind("\n\n")
    paragraph = window if blank == -1 else window[blank + 2 :]
    announcement = _ANNOUNCEMENT.search(paragraph)
    return announcement is not None and _NOT_SOURCES.search(paragraph, announcement.end()) is None


class AmbiguousNumbering(ValueError):
    """Numbered markers were found, but not as one consecutive list of one kind."""


def scan_numbered(text: str, start: int = 0, end: int | None = None) -> Iterator[DocumentSpan]:
    """The numbered documents of `text[start:end]`; nothing when fewer than two markers are found.

    Raises:
        AmbiguousNumbering: markers of mixed kinds, or numbers that skip or restart.
    """
    limit = len(text) if end is None else end
    markers = list(_markers(text, start, limit))
    if len(markers) < 2:
        return
    kinds = {kind for kind, _, _ in markers}
    numbers = [number for _, number, _ in markers]
    base = numbers[0]
    if len(kinds) > 1 or base not in (0, 1) or numbers != list(range(base, base + len(numbers))):
        raise AmbiguousNumbering(f"{len(markers)} numbered markers that are not one list")
    most_paragraphs = 1
    for index, (_, number, at) in enumerate(markers):
        if index + 1 < len(markers):
            stop = markers[index + 1][2]
        else:
            stop = last_block_end(text, at, limit, most_paragraphs) or limit
        raw_end = at + len(text[at:stop].rstrip())
        most_paragraphs = max(most_paragraphs, paragraph_count(text[at:raw_end]))
        yield DocumentSpan(start=at, end=raw_end, text=text[at:raw_end].strip(), number=number)


def _markers(text: str, start: int, limit: int) -> Iterator[tuple[str, int, int]]:
    for match in _MARKER.finditer(text, start, limit):
        digits = match.group("n1") or match.group("n2")
        number = position(digits)
        if number is None:
            continue
        word = match.group("word")
        kind = word.casefold() if word else "[]"
        yield kind, number, match.start() + len(match.group(0)) - len(match.group(0).lstrip())
