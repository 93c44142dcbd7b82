"""Text formats in which documents appear inside a chat message.

Each scanner finds the documents of one format in a piece of text and reports them as spans. A span is the
exact slice of the text that holds one document (its raw form), plus where its positional number sits, so
that a document can be re-rendered at another position and, at its own position, reproduces its raw text.
Everything between spans stays byte for byte as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class DocumentFormat(StrEnum):
    """How the documents of a request were written."""

    LITM = "litm"
    """Lost in the Middle: one `Document [i](Title: t) text` line per document."""
    XML = "xml"
    """`<document ...>...</document>` or `<doc ...>...</doc>` elements."""
    HEADED = "headed"
    """Blocks opened by a `Document N:` line or a `## Document N` heading."""
    JSON_KV = "json-kv"
    """A JSON object of string records (the key-value retrieval task); each record is a document."""
    PARTS = "parts"
    """Separate text content parts of one message; the last text part is the question."""


@dataclass(frozen=True, slots=True)
class DocumentSpan:
    """One document found in a text, by offsets into that text."""

    start: int
    end: int
    text: str
    title: str | None = None
    number: int | None = None
    number_span: tuple[int, int] | None = None
    """Offsets of the positional number, relative to `start`."""


Scanner = Callable[[str], list[DocumentSpan]]

_LITM_LINE = re.compile(r"(?m)^Document \[(?P<num>\d+)\](?:\(Title: (?P<title>[^\n]*?)\))? (?P<text>[^\n]*)$")
_XML_ELEMENT = re.compile(r"(?s)<(?P<tag>document|doc)(?P<attrs>\s[^>]*)?>(?P<text>.*?)</(?P=tag)\s*>")
_XML_TITLE = re.compile(r"""\btitle\s*=\s*(?P<q>["'])(?P<title>.*?)(?P=q)""")
_XML_INDEX = re.compile(r"""\b(?:index|id)\s*=\s*(?P<q>["']?)(?P<num>\d+)(?P=q)""")
_HEADER = re.compile(r"(?m)^(?P<hashes>#{1,6} *)?Document (?P<num>\d+)(?P<rest>:[^\n]*|[ \t]*$)")
# A paragraph opened by one of these ends the last headed document: it is the question, not document text.
_TRAILING_CUE = re.compile(r"\n[ \t]*\n(?=[ \t]*(?:#{1,6} *)?(?:Question|Query|Q:|Answer|Key|Instruction|Task)\b)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_MAX_JSON_ATTEMPTS = 50


def scan_litm(text: str) -> list[DocumentSpan]:
    """Lost in the Middle lines: `Document [i](Title: t) text`, the title part optional."""
    spans = []
    for m in _LITM_LINE.finditer(text):
        spans.append(
            DocumentSpan(
                start=m.start(),
                end=m.end(),
                text=m.group("text"),
                title=m.group("title"),
                number=int(m.group("num")),
                number_span=(m.start("num") - m.start(), m.end("num") - m.start()),
            )
        )
    return spans


def scan_xml(text: str) -> list[DocumentSpan]:
    """`<document>`/`<doc>` elements; `title=` and `index=`/`id=` attributes are read when present."""
    spans = []
    for m in _XML_ELEMENT.finditer(text):
        attrs = m.group("attrs") or ""
        attrs_offset = (m.start("attrs") if m.group("attrs") else m.end("tag")) - m.start()
        title = _XML_TITLE.search(attrs)
        index = _XML_INDEX.search(attrs)
        spans.append(
            DocumentSpan(
                start=m.start(),
                end=m.end(),
                text=m.group("text").strip(),
                title=title.group("title") if title else None,
                number=int(index.group("num")) if index else None,
                number_span=(attrs_offset + index.start("num"), attrs_offset + index.end("num")) if index else None,
            )
        )
    return spans


def scan_headed(text: str) -> list[DocumentSpan]:
    """Blocks under `Document N:` lines or `## Document N` headings.

    A block runs to the next header. The last one ends at a blank line followed by a question cue
    (`Question:`, `Answer:`, `Key:` ...), else, for plain `Document N:` blocks, at its first blank line, else at
    the next Markdown heading or the end of the text.
    """
    headers = list(_HEADER.finditer(text))
    spans = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else _last_block_end(text, header)
        raw = text[header.start() : end]
        end = header.start() + len(raw.rstrip())
        rest = header.group("rest").lstrip(":").strip()
        is_heading = bool(header.group("hashes"))
        body = text[header.end() : end].strip()
        spans.append(
            DocumentSpan(
                start=header.start(),
                end=end,
                text=body if is_heading else (rest + ("\n" + body if body else "")).strip(),
                title=(rest or None) if is_heading else None,
                number=int(header.group("num")),
                number_span=(header.start("num") - header.start(), header.end("num") - header.start()),
            )
        )
    return spans


def _last_block_end(text: str, header: re.Match[str]) -> int:
    cue = _TRAILING_CUE.search(text, header.end())
    if cue:
        return cue.start()
    if header.group("hashes"):
        heading = re.compile(r"(?m)^#{1,6} ").search(text, header.end())
        return heading.start() if heading else len(text)
    blank = _BLANK_LINE.search(text, header.end())
    return blank.start() if blank else len(text)


def scan_json_kv(text: str) -> list[DocumentSpan]:
    """The first JSON object in the text with at least two records, all of them strings."""
    decoder = json.JSONDecoder()
    position = text.find("{")
    attempts = 0
    while position != -1 and attempts < _MAX_JSON_ATTEMPTS:
        attempts += 1
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict) and len(value) >= 2 and all(isinstance(v, str) for v in value.values()):
            return _json_records(text, position, end, decoder)
        position = text.find("{", end)
    return []


def _json_records(text: str, start: int, end: int, decoder: json.JSONDecoder) -> list[DocumentSpan]:
    spans = []
    position = _skip_space(text, start + 1)
    while position < end and text[position] != "}":
        key, after_key = decoder.raw_decode(text, position)
        colon = _skip_space(text, after_key)
        value, after_value = decoder.raw_decode(text, _skip_space(text, colon + 1))
        spans.append(DocumentSpan(start=position, end=after_value, text=f"{key}: {value}", title=key))
        position = _skip_space(text, after_value)
        if text[position] == ",":
            position = _skip_space(text, position + 1)
    return spans


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


SCANNERS: tuple[tuple[DocumentFormat, Scanner], ...] = (
    (DocumentFormat.LITM, scan_litm),
    (DocumentFormat.XML, scan_xml),
    (DocumentFormat.HEADED, scan_headed),
    (DocumentFormat.JSON_KV, scan_json_kv),
)
"""Tried in this order; the first format that finds a document in a text wins."""


def render_litm_line(number: int, text: str, title: str | None) -> str:
    """One document in the Lost in the Middle format (its newlines folded, as the format is one line each)."""
    body = " ".join(text.split("\n"))
    return f"Document [{number}](Title: {title}) {body}" if title is not None else f"Document [{number}] {body}"
