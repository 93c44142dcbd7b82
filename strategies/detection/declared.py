"""Formats an operator declares for in-house prompt templates; a declared format wins over guessing.

A declaration names literal markers only, so matching is a few `str.find` passes, linear in the prompt: a
region between `start` and `end` (either may be omitted: the text's start or end), split into documents at a
literal `separator`, or at each occurrence of `document_start`, a literal in which `{n}` stands for a
document's number (`Source {n}:`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from contextlift.strategies.spans import DocumentSpan

NUMBER_SLOT = "{n}"


@dataclass(frozen=True, slots=True)
class DeclaredFormat:
    """One operator-declared prompt template."""

    name: str
    models: tuple[str, ...] = ("*",)
    """Model names (shell-style patterns) whose requests may use this format; `*` is every model."""
    start: str = ""
    """Literal text just before the first document; empty: the text's start."""
    end: str = ""
    """Literal text just after the last document; empty: the text's end."""
    separator: str = ""
    """Literal text between two documents."""
    document_start: str = ""
    """Literal text that opens each document, `{n}` standing for its number; used when `separator` is empty."""

    def __post_init__(self) -> None:
        if bool(self.separator) == bool(self.document_start):
            raise ValueError(f"declared format {self.name!r}: set exactly one of separator and document_start")
        if self.document_start.count(NUMBER_SLOT) > 1:
            raise ValueError(f"declared format {self.name!r}: document_start may hold {NUMBER_SLOT} once")
        if self.document_start.replace(NUMBER_SLOT, "").strip() == "" and self.document_start:
            raise ValueError(f"declared format {self.name!r}: document_start needs text besides {NUMBER_SLOT}")

    def applies_to(self, model: str | None) -> bool:
        """Whether a request for `model` may be read with this format."""
        return any(fnmatch.fnmatchcase(model or "", pattern) for pattern in self.models)

    def scan(self, text: str) -> list[DocumentSpan]:
        """The documents of `text` in this format; [] when its region is not there."""
        begin = 0
        if self.start:
            found = text.find(self.start)
            if found == -1:
                return []
            begin = found + len(self.start)
        finish = len(text)
        if self.end:
            found = text.find(self.end, begin)
            if found == -1:
                return []
            finish = found
        if self.separator and not (self.start or self.end) and text.find(self.separator, begin, finish) == -1:
            # No marker of the format is in the text at all: a plain message is not one document of it.
            return []
        pieces = self._separated(text, begin, finish) if self.separator else self._opened(text, begin, finish)
        spans = []
        for a, b in pieces:
            piece = text[a:b]
            core = piece.strip()
            if core:
                # The whitespace around a document stays between documents, so a moved one brings none along.
                first = a + len(piece) - len(piece.lstrip())
                spans.append(DocumentSpan(start=first, end=first + len(core), text=core))
        return spans

    def _separated(self, text: str, begin: int, finish: int) -> Iterator[tuple[int, int]]:
        at = begin
        while (found := text.find(self.separator, at, finish)) != -1:
            yield at, found
            at = found + len(self.separator)
        yield at, finish

    def _opened(self, text: str, begin: int, finish: int) -> Iterator[tuple[int, int]]:
        before, _, after = self.document_start.partition(NUMBER_SLOT)
        slot = NUMBER_SLOT in self.document_start
        pattern = re.compile(re.escape(before) + (r"\d{1,9}" + re.escape(after) if slot else ""))
        # A literal, or a literal, a bounded digit run and a literal: no backtracking beyond nine digits.
        starts = [m.start() for m in pattern.finditer(text, begin, finish)]
        yield from zip(starts, [*starts[1:], finish][: len(starts)], strict=True)


def declared_for(formats: Sequence[DeclaredFormat], model: str | None) -> list[DeclaredFormat]:
    """The declared formats that apply to a request for `model`, in declaration order."""
    return [f for f in formats if f.applies_to(model)]
