"""Finding the question a request asks about its documents.

In order: the latest user turn after the documents' message (a chat goes on after the context was given, and
the latest turn is what is asked now); a cue line after the documents (`Question: ...`, `Query: ...`, `User
query:`, `Key: ...`, DSPy's `[[ ## question ## ]]` field, a `## Question` heading with the question below it, an
instruction naming the question that ends in a colon: `Answer the following question using the context: ...`);
a cue line before them (the question first, as in LangChain's rag-prompt); the text after the documents once
answer slots (`Answer:`) are set aside.
"""

from __future__ import annotations

import re

from contextlift.strategies.request import is_instruction
from contextlift.strategies.spans import END_CUE, QUESTION_HEADING, QUESTION_INSTRUCTION

# Anchored at a line start; the rest of the line is the question, or the next line when the cue stands alone.
_CUE_LINE = re.compile(
    r"(?im)^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:question|query|user query|user question|q|key|input)(?:\*\*)?"
    r"[ \t]*:[ \t]*(?P<q>[^\n]*)$"
)
_FIELD = re.compile(r"(?m)^[ \t]*\[\[ ## (?:question|query|input) ## \]\][ \t]*$")
_HEADING = re.compile(rf"(?im){QUESTION_HEADING}")
_INSTRUCTION = re.compile(rf"(?im){QUESTION_INSTRUCTION}[ \t]*(?P<q>[^\n]*)$")
# What closes the documents' wrapper (`</documents>`, a pasted JSON list's `]`) when the question follows it.
_CLOSING_TAGS = re.compile(r"\A(?:\s*(?:</[A-Za-z_][\w.-]{0,40}\s*>|\]))+")
_ANSWER_SLOT = re.compile(
    r"(?im)^[ \t]*(?:answer|helpful answer|final answer|corresponding value|response)[ \t]*:[ \t]*$"
)


def find_question(head: str, tail: str, later_user_text: str, *, bare: bool = True) -> str:
    """The question, or "" when none is found; without `bare`, text after the documents counts only when a
    cue line marks it (the caller does not know where the documents end). Text after the documents that only
    instructs (`is_instruction`) is not the question."""
    if later_user_text.strip():
        return later_user_text.strip()
    for text, before in ((tail, False), (head, True)):
        found = _cued(text, before=before)
        if found:
            return found
    if not bare:
        return ""
    rest = _CLOSING_TAGS.sub("", _ANSWER_SLOT.sub("", tail)).strip().strip("`").strip()
    return "" if is_instruction(rest) else rest


def _cued(text: str, *, before: bool) -> str:
    field = _FIELD.search(text) or _HEADING.search(text)
    if field:
        return _next_line(text, field.end())
    # Above the documents the cue nearest them asks: a template's worked examples hold `QUESTION:` lines of their
    # own before its real one (LangChain's qa_with_sources prompt).
    cue = _last(_CUE_LINE, text) if before else _CUE_LINE.search(text)
    if cue is not None:
        return cue.group("q").strip() or _next_line(text, cue.end())
    instruction = _INSTRUCTION.search(text)
    if instruction is None:
        return ""
    # Above the documents, `Answer the question using the following context:` introduces the context, not the
    # question: there only a question on the instruction's own line counts.
    asked = instruction.group("q").strip()
    return asked if asked or before else _next_line(text, instruction.end())


def question_lines(text: str) -> int:
    """How many cue lines in `text` open a question (`Question: ...`, `## Question`, DSPy's question field), up to 2."""
    lines: set[int] = set()
    for pattern in (_CUE_LINE, _FIELD, _HEADING):
        for cue in pattern.finditer(text):
            lines.add(text.rfind("\n", 0, cue.start()) + 1)  # `**Question:**` is a cue line and a heading: one line
            if len(lines) >= 2:
                return 2
    return len(lines)


_FILLED_ANSWER = re.compile(
    r"(?im)^[ \t]*(?:\*\*)?(?:answer|helpful answer|final answer|a)[ \t]*+:[ \t]*+(?:\*\*)?[ \t]*+[^\s*][^\n]*$"
)
"""An answer line that says something (`Helpful Answer: CTL LLC.`): a worked example's, where a template's own answer
slot is empty."""


def worked_example_in(text: str) -> bool:
    """Whether `text` holds a question cue line and, after it, an answer written out: a worked example."""
    first = END_CUE.search(text)
    return first is not None and _FILLED_ANSWER.search(text, first.start()) is not None


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the loop keeps the last match
        pass
    return found


def _next_line(text: str, position: int) -> str:
    for line in text[position:].split("\n", 8)[:8]:
        if line.strip():
            return line.strip()
    return ""
