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
from collections.abc import Generator, Iterator

import numpy as np

from contextlift.strategies.spans import (
    DocumentFormat,
    DocumentSpan,
    Scanner,
    last_block_end,
    paragraph_count,
    skip_json_space,
)
from contextlift.strategies.spans import position as number_of

_LITM_LINE = re.compile(r"(?m)^Document \[(?P<num>\d+)\](?:\(Title: (?P<title>[^\n]*?)\))? (?P<text>[^\n]*)$")
# An opening or closing tag; its attributes stop at the next `<` or `>`, so each match attempt reads only up to the
# next tag and the scan stays linear.
_XML_TAG = re.compile(r"<(?P<close>/)?(?P<tag>document|doc|source)(?:[ \t\r\n][^<>]*+)?>")
_XML_RESTARTS = 8
"""Lines that open a tag and never close it (prose about the tag) read past before the tags prove nothing."""
_MAX_XML_DEPTH = 64
"""Documents nest a few elements deep at most; a text that opens more without closing them proves nothing, and the
open tags it holds stay few (a megabyte of `<doc>` lines kept 200,000 of them, and was read eight times)."""
_XML_TITLE = re.compile(r"""\b(?:title|name)\s*=\s*(?P<q>["'])(?P<title>.*?)(?P=q)""")
_XML_INDEX = re.compile(r"""\b(?P<attr>index|id)\s*=\s*(?P<q>["']?)(?P<num>\d+)(?P=q)""")
_HEADER = re.compile(r"(?m)^(?P<hashes>#{1,6} *)?Document (?P<num>\d+)(?P<rest>:[^\n]*|[ \t]*$)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_PAIRED_OPEN = re.compile(r"(?m)^[ \t]*\[(?P<word>[A-Z][A-Z]{1,30}) (?P<num>\d{1,9})\]:?[ \t]*$")
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


class AmbiguousElements(ValueError):
    """Tags or labels that, read further, prove no units after all (two runs of elements, each of which could be
    the documents; elements nested past any document's depth; numbered labels that stop running in order)."""


def scan_xml(text: str) -> Iterator[DocumentSpan]:
    """`<document>`, `<doc>` and `<source>` elements, where they are well formed; `title=` (or `name=`, a file's
    name) and `index=`/`id=` attributes are read when present.

    An element is a unit only where its tags prove it: its opening tag opens a line (or follows another tag), and
    its closing tag of the same name closes it at the same depth: a `<source id="1">` written in an instruction's
    prose and a `<doc>` quoted inside a `<source>` are no units. (Code fences are not read here: a splitter cuts
    a chunk inside a code block, and its fence then seems to run on into the next element, across the tags that
    close one element and open the next. Elements quoted in a chunk's code fence have the chunk's text around
    them, which the callers refuse.) Elements inside an element belong to it. The units are the
    first run of top-level elements of one tag with nothing but the same punctuation or whitespace between them
    (text between them would be a larger chunk they sit in). A line that opens a tag never closed is prose about
    the tag, and the tags after it are read again.

    Raises (once the units are yielded, while the caller reads on):
        AmbiguousElements: a second run of two or more elements: which one holds the documents is a guess.

    One pass over the tags (a few more past unclosed ones): linear in the text. Units are yielded as their
    closing tags are read, so a caller that takes only the first few reads no further.
    """
    position = 0
    for _ in range(_XML_RESTARTS):
        reread_from = yield from _elements_from(text, position)
        if reread_from is None:
            return
        position = reread_from


def _elements_from(text: str, position: int) -> Generator[DocumentSpan, None, int | None]:
    """The units of `scan_xml`, reading tags from `position`; returns where to read again from when a line opened
    a tag that never closed before any unit was found (None when done)."""
    stack: list[re.Match[str]] = []
    run: list[DocumentSpan] = []
    run_tag = join = ""
    finished = False
    for tag in _XML_TAG.finditer(text, position):
        name = tag.group("tag")
        if not tag.group("close"):
            if _opens_a_line(text, tag.start()):
                stack.append(tag)
                if len(stack) > _MAX_XML_DEPTH:
                    raise AmbiguousElements("elements nested deeper than documents are")
            continue
        if not stack:
            continue  # a closing tag in prose, outside any element
        if stack[-1].group("tag") != name:
            if any(t.group("tag") == name for t in stack):
                raise AmbiguousElements("tags closed out of order")
            continue  # `</doc>` written inside a `<source>`: the source's text
        opening = stack.pop()
        if stack:
            continue
        unit = _xml_span(text, opening, tag)
        gap = text[run[-1].end : unit.start].strip() if run else ""
        if run and name == run_tag and not any(c.isalnum() for c in gap) and (len(run) == 1 or gap == join):
            join = gap
            run.append(unit)
            if finished:
                raise AmbiguousElements("a second run of elements")
            if len(run) == 2:
                yield run[0]
            yield unit
            continue
        finished = finished or len(run) >= 2
        run, run_tag, join = [unit], name, ""
    if stack and not finished and len(run) < 2:
        return stack[0].end()
    if not finished and len(run) == 1:
        yield run[0]
    return None


def _xml_span(text: str, opening: re.Match[str], closing: re.Match[str]) -> DocumentSpan:
    attrs = text[opening.end("tag") : opening.end() - 1]
    title = _XML_TITLE.search(attrs)
    index = _XML_INDEX.search(attrs)
    number = number_of(index.group("num")) if index else None
    # An `index` or `id` is the app's label for its unit (DocsGPT's `<document index="2">`, Open WebUI's `<source id>`,
    # Flowise's `<doc id='4'>`), which its answer cites and the app maps back: where it sits is kept (a step names
    # the document by it), and the block never renumbers it (`find._block_from_spans`).
    offset = opening.end("tag") - opening.start()
    return DocumentSpan(
        start=opening.start(),
        end=closing.end(),
        text=text[opening.end() : closing.start()].strip(),
        title=title.group("title") if title else None,
        number=number,
        number_span=(offset + index.start("num"), offset + index.end("num")) if index and number is not None else None,
    )


def _opens_a_line(text: str, position: int) -> bool:
    """Whether only spaces stand between `position` and its line's start or a tag's `>` before it."""
    at = position - 1
    while at >= 0 and text[at] in " \t":
        at -= 1
    return at < 0 or text[at] in "\n>"


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


def scan_paired_labels(text: str) -> Iterator[DocumentSpan]:
    """Units an app opens and closes by number: `[CONTEXT 0]:` ... `[END CONTEXT 0]` (AnythingLLM), each opening
    on a line of its own, the numbers running in order from 0 or 1 under one word, each unit closed by the end
    label of its own number before the next opens.

    Raises (once units are yielded, while the caller reads on):
        AmbiguousElements: a later label breaks the run (another word or number, a unit never closed).

    Linear: the openings are found in one pass, and each end label is looked for only up to the next opening.
    Units are yielded as they are read, so a caller that takes only the first few reads no further."""
    openings = _PAIRED_OPEN.finditer(text)
    current = next(openings, None)
    word, expected = "", None
    while current is not None:
        following = next(openings, None)
        number = number_of(current.group("num"))
        if expected is None and number not in (0, 1):
            return
        if expected is not None and (number != expected or current.group("word") != word):
            raise AmbiguousElements("numbered labels that do not run in order")
        word, expected = current.group("word"), (number or 0) + 1
        closing = f"[END {word} {current.group('num')}]"
        at = text.find(closing, current.end(), following.start() if following is not None else len(text))
        if at == -1:
            if number in (0, 1):
                return  # an opening label alone: no units
            raise AmbiguousElements("a numbered unit never closed")
        if following is None and number in (0, 1):
            return  # one unit alone proves no run
        yield DocumentSpan(start=current.start(), end=at + len(closing), text=text[current.end() : at].strip())
        current = following


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
    (DocumentFormat.NUMBERED, scan_paired_labels),
    (DocumentFormat.JSON_KV, scan_json_kv),
)
"""The papers' own formats, tried in this order before the shapes of `contextlift.strategies.detection.regions` and
`contextlift.strategies.detection.numbered`."""

# Every character `str.splitlines` ends a line at: a model reads any of them as a line break.
