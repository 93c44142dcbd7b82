"""Text formats in which documents appear inside a chat message.

Each scanner finds the documents of one format in a piece of text and reports them as spans. A span is the
exact slice of the text that holds one document (its raw form), plus where its positional number sits, so
that a document can be re-rendered at another position and, at its own position, reproduces its raw text.
Everything between spans stays byte for byte as it was.

Every scanner takes time linear in its text, whatever the text: a prompt is the client's to choose, and one
whose scan cost the square of its size would hold a core for minutes. No pattern here can backtrack past the line,
element or whitespace run it started in, and no part of the text is searched again for each document found
(the key-value scanner's retries read it at most four times over). Scanners yield their spans one at a time,
so a caller that wants only the first few never builds the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import numpy as np

from strategies.spans import DocumentFormat, DocumentSpan, Scanner, last_block_end, paragraph_count, skip_json_space
from strategies.spans import position as number_of

_LITM_LINE = re.compile(r"(?m)^Document \[(?P<num>\d+)\](?:\(Title: (?P<title>[^\n]*?)\))? (?P<text>[^\n]*)$")
_XML_OPENING = re.compile(r"<(?P<tag>document|doc|source)(?=[\s>])")
_XML_CLOSING = {tag: re.compile(rf"</{tag}\s*>") for tag in ("document", "doc", "source")}
_XML_TAG_END = re.compile(">")
_XML_TITLE = re.compile(r"""\btitle\s*=\s*(?P<q>["'])(?P<title>.*?)(?P=q)""")
_XML_INDEX = re.compile(r"""\b(?:index|id)\s*=\s*(?P<q>["']?)(?P<num>\d+)(?P=q)""")
_HEADER = re.compile(r"(?m)^(?P<hashes>#{1,6} *)?Document (?P<num>\d+)(?P<rest>:[^\n]*|[ \t]*$)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_MARKDOWN_HEADING = re.compile(r"(?m)^#{1,6} ")
_MAX_JSON_ATTEMPTS = 50
_JSON_READS = 4
"""How many times over the attempts may together read the text. Real prompts fail at a stray brace within a
few characters; only text built to fail late, attempt after attempt, gets this far, and it holds no document."""
_MAX_JSON_DEPTH = 64
"""A key-value document is one flat object: text nesting deeper holds none. The bound also keeps the JSON
decoder, which recurses once per level, far from the interpreter's recursion limit."""
# Strings (an unterminated one runs to the end) and every other character but a bracket. Possessive, so that no
# input makes the engine backtrack; what it leaves of a text is the brackets outside its strings.
_JSON_NOT_BRACKET = re.compile(r'"(?:[^"\\]++|\\.)*+"?|[^\[\]{}"]++', re.DOTALL)
_JSON_FIRST_WINDOW = 4096


def scan_litm(text: str) -> Iterator[DocumentSpan]:
    """Lost in the Middle lines: `Document [i](Title: t) text`, the title part optional."""
    # Linear: each match attempt starts at a line start and cannot run past that line's end.
    for m in _LITM_LINE.finditer(text):
        number = number_of(m.group("num"))
        yield DocumentSpan(
            start=m.start(),
            end=m.end(),
            text=m.group("text"),
            title=m.group("title"),
            number=number,
            number_span=(m.start("num") - m.start(), m.end("num") - m.start()) if number is not None else None,
        )


def scan_xml(text: str) -> Iterator[DocumentSpan]:
    """`<document>`/`<doc>` elements; `title=` and `index=`/`id=` attributes are read when present.

    An element runs from its opening tag to the first closing tag of the same name. Written out by hand rather
    than as one pattern: a pattern searches the rest of the text for a closing tag from every opening tag that
    has none (`"<doc>" * 16000` cost 11 s). Here each search resumes where the last one stopped.
    """
    closings = {tag: _NextMatch(pattern, text) for tag, pattern in _XML_CLOSING.items()}
    angle = _NextMatch(_XML_TAG_END, text)
    position = 0
    while (opening := _XML_OPENING.search(text, position)) is not None:
        tag_end = angle.at_or_after(opening.end())
        if tag_end is None:
            return  # no `>` anywhere further: no later element can be complete either
        closing = closings[opening.group("tag")].at_or_after(tag_end.end())
        if closing is None:
            position = opening.start() + 1
            continue
        attrs = text[opening.end() : tag_end.start()]
        attrs_offset = opening.end() - opening.start()
        title = _XML_TITLE.search(attrs)
        index = _XML_INDEX.search(attrs)
        number = number_of(index.group("num")) if index else None
        yield DocumentSpan(
            start=opening.start(),
            end=closing.end(),
            text=text[tag_end.end() : closing.start()].strip(),
            title=title.group("title") if title else None,
            number=number,
            number_span=(attrs_offset + index.start("num"), attrs_offset + index.end("num"))
            if index and number is not None
            else None,
        )
        position = closing.end()


class _NextMatch:
    """The first match of a pattern at or after a position, for positions that only move forward.

    A match found for an earlier position is still the first one for any later position up to it, so the
    text is searched at most once in all.
    """

    def __init__(self, pattern: re.Pattern[str], text: str) -> None:
        self._pattern = pattern
        self._text = text
        self._searched = False
        self._found: re.Match[str] | None = None

    def at_or_after(self, position: int) -> re.Match[str] | None:
        if not self._searched or (self._found is not None and self._found.start() < position):
            self._searched = True
            self._found = self._pattern.search(self._text, position)
        return self._found


def scan_headed(text: str) -> Iterator[DocumentSpan]:
    """Blocks under `Document N:` lines or `## Document N` headings.

    A block runs to the next header. The last one ends before a question cue (`Question:`, `Answer:`, `Key:`
    ...); else it holds no more paragraphs than the longest block before it, and a closing paragraph that asks
    (ends in `?`) is the question; a lone block ends, for plain `Document N:` blocks, at its first blank line,
    else at the next Markdown heading or the end of the text.
    """
    headers = _HEADER.finditer(text)
    header = next(headers, None)
    most_paragraphs: int | None = None
    while header is not None:
        following = next(headers, None)
        end = following.start() if following is not None else _last_block_end(text, header, most_paragraphs)
        raw = text[header.start() : end]
        end = header.start() + len(raw.rstrip())
        rest = header.group("rest").lstrip(":").strip()
        is_heading = bool(header.group("hashes"))
        body = text[header.end() : end].strip()
        number = number_of(header.group("num"))
        most_paragraphs = max(most_paragraphs or 1, paragraph_count(text[header.start() : end]))
        yield DocumentSpan(
            start=header.start(),
            end=end,
            text=body if is_heading else (rest + ("\n" + body if body else "")).strip(),
            title=(rest or None) if is_heading else None,
            number=number,
            number_span=(header.start("num") - header.start(), header.end("num") - header.start())
            if number is not None
            else None,
        )
        header = following


def _last_block_end(text: str, header: re.Match[str], paragraphs: int | None) -> int:
    found = last_block_end(text, header.start(), len(text), paragraphs)
    if found is not None:
        return found
    if header.group("hashes"):
        heading = _MARKDOWN_HEADING.search(text, header.end())
        return heading.start() if heading else len(text)
    blank = _BLANK_LINE.search(text, header.end())
    return blank.start() if blank else len(text)


def scan_json_kv(text: str) -> Iterator[DocumentSpan]:
    """The first JSON object in the text with at least two records, all of them strings.

    Text whose brackets nest deeper than 64 levels, from where an object would start, holds no such object;
    nor does text that fails to decode late, again and again, until the attempts have read it four times over.
    """
    decoder = json.JSONDecoder()
    position = text.find("{")
    attempts = 0
    unread = _JSON_READS * len(text)
    while position != -1 and attempts < _MAX_JSON_ATTEMPTS:
        attempts += 1
        too_deep, reach = _brackets_from(text, position)
        unread -= reach
        if too_deep or unread < 0:
            return
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:  # a decode error, or an integer past 4,300 digits, which json refuses
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict) and len(value) >= 2 and all(isinstance(v, str) for v in value.values()):
            yield from _json_records(text, position, end, decoder)
            return
        position = text.find("{", end)


def _brackets_from(text: str, start: int) -> tuple[bool, int]:
    """Whether the brackets opened at `start` nest deeper than `_MAX_JSON_DEPTH` before they close, and how
    many characters were read to tell.

    The brackets outside strings are counted over windows that double in size until they close, so the cost
    follows the length of the value, not of the text. The decoder can go no deeper, nor read further.
    """
    window = _JSON_FIRST_WINDOW
    while True:
        end = min(len(text), start + window)
        brackets = np.frombuffer(_JSON_NOT_BRACKET.sub("", text[start:end]).encode("ascii"), dtype=np.uint8)
        depth = np.cumsum(np.where((brackets == ord("{")) | (brackets == ord("[")), 1, -1))
        closed = np.flatnonzero(depth == 0)
        reached = depth[: closed[0] + 1] if closed.size else depth
        if reached.size and int(reached.max()) > _MAX_JSON_DEPTH:
            return True, end - start
        if closed.size or end == len(text):
            return False, end - start
        window *= 2


def _json_records(text: str, start: int, end: int, decoder: json.JSONDecoder) -> Iterator[DocumentSpan]:
    position = skip_json_space(text, start + 1)
    while position < end and text[position] != "}":
        key, after_key = decoder.raw_decode(text, position)
        colon = skip_json_space(text, after_key)
        value, after_value = decoder.raw_decode(text, skip_json_space(text, colon + 1))
        yield DocumentSpan(start=position, end=after_value, text=f"{key}: {value}", title=key)
        position = skip_json_space(text, after_value)
        if text[position] == ",":
            position = skip_json_space(text, position + 1)


SCANNERS: tuple[tuple[DocumentFormat, Scanner], ...] = (
    (DocumentFormat.LITM, scan_litm),
    (DocumentFormat.XML, scan_xml),
    (DocumentFormat.HEADED, scan_headed),
    (DocumentFormat.JSON_KV, scan_json_kv),
)
"""The papers' own formats, tried in this order before the shapes of `strategies.detection.regions` and
`strategies.detection.numbered`."""

# Every character `str.splitlines` ends a line at: a model reads any of them as a line break.
