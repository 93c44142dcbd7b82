"""The parts of a text that Markdown encloses: fenced code blocks and YAML front matter.

Documentation sites are the most common RAG corpus, and their chunks carry Markdown source: a code fence holding
`---` lines (YAML, a diff), `<doc>` lines (an HTML example) or `Document [1]` lines (a prompt example), and front
matter between two `---` lines at the top of a page. A separator line inside either is the chunk's own text, never a
join between chunks (`strategies.detection.chunks`), and a context that holds either is marked-up source, whose
chunks may hold the join's own rule.

A fence opens with three or more backticks or tildes (indented by at most three spaces) and closes with a line of
the same character, at least as long, and nothing else (CommonMark, 4.5). A fence that never closes masks
nothing: a splitter cuts chunks in the middle of code blocks, and such a half-open fence would otherwise swallow
every later document of the prompt. Front matter is a `---` line that opens a chunk, `key: value` lines, and a
closing `---` or `...` line.

One pass over the lines: linear in the text. At most `_MAX_FENCE_LINES` fence lines are read: past them, the text
is marked-up source already, and a hostile one keeps no more of them in memory.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

_FENCE_LINE = re.compile(r"(?m)^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")
_FRONT_MATTER_OPEN = re.compile(r"(?m)^---[ \t]*\n(?=[A-Za-z_][\w.\-]{0,40}:)")
_FRONT_MATTER_CLOSE = re.compile(r"(?m)^(?:---|\.\.\.)[ \t]*$")
_FRONT_MATTER_LINE = re.compile(r"[ \t]*(?:[A-Za-z_][\w.\-]{0,40}:.*|- .*|#.*|)")
_MAX_FRONT_MATTER_LINES = 60
_MAX_FRONT_MATTER_CHARS = 8_000
_REREADS = 16
_MAX_FENCE_LINES = 4_096


@dataclass(frozen=True, slots=True)
class Enclosed:
    """The ranges of a text that Markdown encloses, sorted and disjoint, for position look-ups."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def covers(self, position: int) -> bool:
        """Whether `position` lies inside a fenced block or front matter (its opening and closing lines included)."""
        index = bisect.bisect_right(self.starts, position) - 1
        return index >= 0 and position < self.ends[index]

    def __bool__(self) -> bool:
        return bool(self.starts)


def enclosed_ranges(text: str, start: int = 0, end: int | None = None) -> Enclosed:
    """The fenced code blocks and front matter of `text[start:end]`."""
    limit = len(text) if end is None else end
    ranges = _fenced(text, start, limit)
    fences = _enclosing(ranges)
    matter: list[tuple[int, int]] = []
    for opening in _FRONT_MATTER_OPEN.finditer(text, start, limit):
        if (matter and opening.start() < matter[-1][1]) or fences.covers(opening.start()):
            continue
        closed = _front_matter_end(text, opening, limit)
        if closed is not None:
            matter.append((opening.start(), closed))
    return _enclosing(sorted(ranges + matter))


def _enclosing(ranges: list[tuple[int, int]]) -> Enclosed:
    return Enclosed(tuple(a for a, _ in ranges), tuple(b for _, b in ranges))


def _fenced(text: str, start: int, limit: int) -> list[tuple[int, int]]:
    """Closed fenced blocks, read as CommonMark reads them: inside a fence, a fence line only closes it. A fence
    left open at the end is read again as plain text, from the line after it (at most `_REREADS` times: past
    that, the rest masks nothing)."""
    found = (m for m in _FENCE_LINE.finditer(text, start, limit) if not _inline_code(m))
    lines = list(itertools.islice(found, _MAX_FENCE_LINES))
    ranges: list[tuple[int, int]] = []
    index = 0
    for _ in range(_REREADS):
        opened: re.Match[str] | None = None
        opened_at = index
        while index < len(lines):
            line = lines[index]
            if opened is None:
                opened, opened_at = line, index
            elif _closes(line, opened):
                ranges.append((opened.start(), line.end()))
                opened = None
            index += 1
        if opened is None:
            break
        index = opened_at + 1
    return ranges


def _inline_code(line: re.Match[str]) -> bool:
    return line.group("fence")[0] == "`" and "`" in line.group("info")  # "```foo```" (CommonMark, 4.5)


def _closes(line: re.Match[str], opening: re.Match[str]) -> bool:
    fence, mark = line.group("fence"), opening.group("fence")
    return fence[0] == mark[0] and len(fence) >= len(mark) and not line.group("info").strip()


def _front_matter_end(text: str, opening: re.Match[str], limit: int) -> int | None:
    """Where the front matter opened at `opening` ends: a chunk's first line only (the text's start, or after a
    blank line or a separator line), `key: value` lines, then a closing line."""
    at = opening.start()
    if at > 0 and not (text.startswith("\n\n", at - 2) or text.startswith("\n---\n", at - 5)):
        return None
    closing = _FRONT_MATTER_CLOSE.search(text, opening.end(), min(limit, opening.end() + _MAX_FRONT_MATTER_CHARS))
    if closing is None:
        return None
    lines = text[opening.end() : closing.start()].split("\n")
    if len(lines) > _MAX_FRONT_MATTER_LINES or not all(_FRONT_MATTER_LINE.fullmatch(line) for line in lines):
        return None
    return closing.end()
