"""Text from outside the run (an upstream's model id and listing, a sink's names and times) as it goes into a report:
one inline code span on one line, bounded, that nothing in the text can end early. Markdown reads no structure
inside a code span (no heading, image, link, emphasis or HTML), and a table cell's `|` is gone with the backticks."""

from __future__ import annotations

import re

LONGEST = 200
"""Characters kept of one value: its text ends up in every report, and an upstream or a sink may send anything."""


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def one_line(text: str) -> str:
    """`text` on one line, without the characters that would end a report's table cell or code span."""
    return "".join(c if c.isprintable() and c not in "`|" else " " for c in text)


def shown_date(time: str) -> str | None:
    """The date a sink's time opens with (`2026-11-27`), the only part of it a report shows; None for anything
    else."""
    return time[:10] if _DATE.fullmatch(time[:10]) else None


def code_span(value: object, limit: int = LONGEST) -> str:
    """`value` as text in an inline code span: on one line, without a backtick or a `|`, at most `limit` characters
    (then `...`)."""
    text = one_line(str(value))
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"`{text}`" if text.strip() else "` `"
