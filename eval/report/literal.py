"""Text from outside the run (an upstream's model id and listing, a sink's names and times) as it goes into a report:
one inline code span on one line, bounded, that nothing in the text can end early. Markdown reads no structure
inside a code span (no heading, image, link, emphasis or HTML), and a table cell's `|` is gone with the backticks."""

from __future__ import annotations

LONGEST = 200
"""Characters kept of one value: its text ends up in every report, and an upstream or a sink may send anything."""


def code_span(value: object, limit: int = LONGEST) -> str:
    """`value` as text in an inline code span: on one line, without a backtick or a `|`, at most `limit` characters
    (then `...`)."""
    text = "".join(c if c.isprintable() and c not in "`|" else " " for c in str(value))
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"`{text}`" if text.strip() else "` `"
