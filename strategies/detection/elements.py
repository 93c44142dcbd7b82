"""Sibling elements of one tag name, whatever the name: the units apps write as `<chunk fileId=... fileName=...>`
(LobeChat), `<data>` (MaxKB), `<result index=...>`, `<file>` ...

`<document>`, `<doc>` and `<source>` are read by `formats.scan_xml`; any other name proves units here on the same
evidence, stricter where the name says nothing of documents:

- every unit's opening tag opens a line (or follows a tag or a label's colon), and its closing tag of the same
  name closes it before the next opens: an opening of the name inside an open element (a chunk quoting the
  grammar's own tag, a forged next unit, or elements nested in their own kind) proves nothing, and the name is not
  read at all;
- the units are one run: consecutive elements with nothing but one and the same whitespace or punctuation between
  them; a second run of the same name is a guess about which holds the documents;
- each unit holds text of its own (a unit that opens with a child element is a record of fields, not a chunk);
- names that HTML and Markdown renderers write (`<p>`, `<div>`, `<li>`, `<br>` ...) are markup inside a chunk;
- the name says the elements were retrieved: its words are words apps give retrieved text (`chunk`, `data`,
  `result`, `passage`, `reference`, `snippet`, `context` ...: `search_result`), maybe joined to `item`, `entry`,
  `node` ... (`contextItem`); `<source_code>`, `<code_snippet>`, `<test_result>` are not. Few-shot `<example>`s,
  `<rule>`s, a recipe's `<step>`s, a log's `<event>`s, a review's `<file>`s or a table's `<row>`s are a prompt's own
  parts, whose order is the point, whatever their attributes say;
- a closing tag of the name met outside an element once the units have begun, with no opening of the name in prose
  before it (`<data></data>` named in an instruction), is a unit's own text (a chunk quoting `</chunk>`): the
  element it sits in was closed too early, and the name proves nothing.

Openings and closings of a name met outside an element (prose about the tag, a closing tag alone) are passed over.
Ids and indices in the attributes are the app's labels: a unit keeps them when it moves (`number_span` is None).

One pass over the text for the names, and one for each of at most `_MAX_NAMES` of them: linear in the text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from contextlift.strategies.spans import DocumentSpan

_OPENING = re.compile(r"<(?P<tag>[A-Za-z][\w.:-]{0,40})(?:[ \t][^<>\n]{0,1000})?>")
_READ_ELSEWHERE = frozenset({"document", "doc", "source"})
"""Names `formats.scan_xml` reads."""
_MARKUP = frozenset({
    "a", "abbr", "article", "b", "blockquote", "body", "br", "code", "dd", "details", "div", "dl", "dt", "em",
    "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hr", "html", "i", "img", "input",
    "label", "li", "link", "main", "meta", "nav", "ol", "option", "p", "pre", "script", "section", "small", "span",
    "strong", "style", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "u", "ul"
})  # fmt: skip
"""What HTML writes: such elements are a chunk's markup, never the units."""
_BEFORE_A_UNIT = "\n>:\uff1a"
"""What may stand just before a unit's opening tag, spaces aside: a line break, a tag, a colon (ASCII or full-width)."""
_MAX_NAMES = 8
"""Names tried, in the order they first open a unit: a prompt names its units among its first few tags."""
_RETRIEVED = frozenset({
    "chunk", "chunks", "passage", "passages", "result", "results", "reference", "references", "snippet", "snippets",
    "excerpt", "excerpts", "context", "contexts", "knowledge", "retrieved", "retrieval", "search", "citation",
    "citations", "evidence", "data", "doc", "docs", "document", "documents", "source", "sources", "article",
    "articles", "hit", "hits"
})  # fmt: skip
"""Words apps name retrieved units with (`chunk`, `data`, `search_result`)."""
_JOINING = frozenset({"item", "items", "entry", "entries", "node", "nodes", "block", "unit", "info", "text"})
"""Words a retrieved unit's name may join to them (`contextItem`); any other word makes the name a prompt's own
(`source_code`, `code_snippet`, `test_result`, `input_data`)."""
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_TITLE = re.compile(
    r"""(?i)\b(?:title|name|file_?name|filename|document_?name)\s*=\s*(?P<q>["'])(?P<title>[^"'\n]{0,300})(?P=q)"""
)


@dataclass(frozen=True, slots=True)
class Elements:
    """The units one tag name proves."""

    tag: str
    spans: list[DocumentSpan]


def scan_elements(text: str) -> Elements | None:
    """The first tag name (other than those `scan_xml` reads, and HTML's) whose elements are one run of two or more
    units, as the module says; None where no name proves units."""
    counts: Counter[str] = Counter()
    for opening in _OPENING.finditer(text):
        name = opening.group("tag")
        if name.lower() not in _READ_ELSEWHERE and name.lower() not in _MARKUP and _opens_unit(text, opening.start()):
            counts[name] += 1
    tried = [name for name, count in counts.items() if count >= 2][:_MAX_NAMES]
    for name in tried:
        words = {word.lower() for word in _NAME_WORD.findall(name)}
        if not words & _RETRIEVED or not words <= _RETRIEVED | _JOINING:
            continue
        spans = _run(text, name)
        if spans:
            return Elements(name, spans)
    return None


def _run(text: str, name: str) -> list[DocumentSpan]:
    """The one run of units of `name`; [] where the name proves none."""
    tags = re.compile(rf"<(?P<close>/)?{re.escape(name)}(?=[\s/>])[^<>]{{0,1000}}>")
    elements: list[DocumentSpan] = []
    opening: re.Match[str] | None = None
    mentioned = False  # an opening in prose since the last closing: `<data></data>` named in an instruction
    for tag in tags.finditer(text):
        if tag.group("close"):
            if opening is not None:
                elements.append(_span(text, opening, tag))
                opening = None
            elif elements and not mentioned:
                return []  # a unit's own `</name>`: the element around it closed early
            mentioned = False
            continue
        if tag.group(0).endswith("/>"):
            continue  # an empty element holds no unit
        if opening is not None:
            return []  # the name opened inside its own element: nested, or a unit quoting the next one's tag
        if _opens_unit(text, tag.start()):
            opening = tag
        else:
            mentioned = True
    runs = _runs(text, elements)
    if len(runs) != 1 or any(not span.text or span.text.startswith("<") for span in runs[0]):
        return []
    return runs[0]


def _runs(text: str, elements: list[DocumentSpan]) -> list[list[DocumentSpan]]:
    """The runs of two or more elements with one join between them, nothing alphanumeric in it."""
    runs: list[list[DocumentSpan]] = []
    current: list[DocumentSpan] = []
    join = ""
    for element in elements:
        gap = text[current[-1].end : element.start].strip() if current else ""
        if current and not any(c.isalnum() for c in gap) and (len(current) == 1 or gap == join):
            join = gap
            current.append(element)
            continue
        if len(current) >= 2:
            runs.append(current)
        current, join = [element], ""
    if len(current) >= 2:
        runs.append(current)
    return runs


def _span(text: str, opening: re.Match[str], closing: re.Match[str]) -> DocumentSpan:
    title = _TITLE.search(opening.group(0))
    return DocumentSpan(
        start=opening.start(),
        end=closing.end(),
        text=text[opening.end() : closing.start()].strip(),
        title=title.group("title") if title else None,
    )


def _opens_unit(text: str, position: int) -> bool:
    """Whether only spaces stand between `position` and its line's start, a tag's `>` or a label's colon before
    it (MaxKB writes its first `<data>` straight after its label `已知信息`, a full-width colon)."""
    at = position - 1
    while at >= 0 and text[at] in " \t":
        at -= 1
    return at < 0 or text[at] in _BEFORE_A_UNIT
