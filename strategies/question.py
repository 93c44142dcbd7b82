"""Finding the question a request asks about its documents.

In order: the latest user turn after the documents' message (a chat goes on after the context was given, and
the latest turn is what is asked now); a cue line after the documents (`Question: ...`, `Query: ...`, `User
query:`, `Key: ...`, DSPy's `[[ ## question ## ]]` field); a cue line before them (the question first, as in
LangChain's rag-prompt); the text after the documents once answer slots (`Answer:`) are set aside.
"""

from __future__ import annotations

import re

# Anchored at a line start; the rest of the line is the question, or the next line when the cue stands alone.
_CUE_LINE = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:question|query|user query|user question|q|key|input)(?:\*\*)?"
    r"[ \t]*:[ \t]*(?P<q>[^\n]*)$"
)
_FIELD = re.compile(r"(?m)^[ \t]*\[\[ ## (?:question|query|input) ## \]\][ \t]*$")
# What closes the documents' wrapper (`</documents>`) when the question follows it.
_CLOSING_TAGS = re.compile(r"\A(?:\s*</[A-Za-z_][\w.-]{0,40}\s*>)+")
_ANSWER_SLOT = re.compile(
    r"(?im)^[ \t]*(?:answer|helpful answer|final answer|corresponding value|response)[ \t]*:[ \t]*$"
)


def find_question(head: str, tail: str, later_user_text: str, *, bare: bool = True) -> str:
    """The question, or "" when none is found; without `bare`, text after the documents counts only when a
    cue line marks it (the caller does not know where the documents end)."""
    if later_user_text.strip():
        return later_user_text.strip()
    for text in (tail, head):
        found = _cued(text)
        if found:
            return found
    if not bare:
        return ""
    return _CLOSING_TAGS.sub("", _ANSWER_SLOT.sub("", tail)).strip()


def _cued(text: str) -> str:
    field = _FIELD.search(text)
    if field:
        return _next_line(text, field.end())
    cue = _CUE_LINE.search(text)
    if cue is None:
        return ""
    return cue.group("q").strip() or _next_line(text, cue.end())


def _next_line(text: str, position: int) -> str:
    for line in text[position:].split("\n", 8)[:8]:
        if line.strip():
            return line.strip()
    return ""
