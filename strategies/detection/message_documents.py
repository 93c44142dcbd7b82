"""Documents that are whole messages, or the items of a tool's JSON list.

- The agent pattern: an assistant message calls tools, and each tool message after it holds one result. The
  results are the documents; each keeps its `tool_call_id`, so moving them never mixes up which call a result
  answers.
- One system message per document, as some apps inject retrieved context: consecutive system (or developer)
  messages that all open the same way (`Document: ...`, `Source 3: ...`, the same `key:` metadata line).
- A tool message whose content is a JSON list of results (a search tool's output): each item is a string or an
  object with a text field (`content`, `text`, `snippet`, `page_content` ...). The items are spans of the
  message's text, so the JSON is reproduced byte for byte.
- A user message that pastes such a list (often pretty-printed) between its instruction and its question
  (`scan_embedded_json_list`): there only objects whose text field holds prose count, and no chat messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextlift.strategies.detection.numbered import WORDS
from contextlift.strategies.spans import DocumentSpan, skip_json_space

TEXT_FIELDS = ("content", "text", "snippet", "page_content", "body", "chunk", "passage", "summary")
"""Object fields read as a result's text, in this order."""
_ORIGIN_WORDS = frozenset({
    "ref", "reference", "source", "url", "uri", "link", "file", "filename", "path", "doc", "document", "title",
    "chunk", "page"
})  # fmt: skip
"""Words of a key that says where an object's text came from (`reference_id`, `sourceUrl`, `doc_id`, `title`); a bare
`id` does not: a chat export's, a ticket's and a dataset's records carry one too."""
_KEY_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_MIN_PASSAGE_WORDS = 12
"""Words in every value of a field read as text for want of a known name: retrieved chunks run to a hundred and
more, a record's values (a step, a log message) to a few."""
TITLE_FIELDS = ("title", "name", "source", "url")

# The opening of a per-document system message: a document word, an optional number, a colon. Other openings
# (`Rules:`, `Title: Safety`) are instructions, not documents. The number's blanks are inside its optional
# group, so no two blank runs can take the same blanks.
_OPENING = re.compile(rf"(?i)[ \t]*(?:#{{1,6}}[ \t]*)?(?P<label>{WORDS})(?:[ \t]*\[?\d{{1,9}}\]?)?[ \t]*:")
# A line that opens a list of objects: where a pasted JSON list of results may start; it must end its line.
_LIST_OPENING = re.compile(r"(?m)^[ \t]*\[[ \t\r\n]*\{")
_LINE_END = re.compile(r"[ \t\r]*(?:\n|\Z)")
_OBJECT_LINE = re.compile(r"(?m)^[ \t]*(?P<object>\{[^\n]*\})[ \t\r]*$")
"""A line holding one JSON object and nothing else; it cannot run past its line."""
# What bracket matching reads: a whole string (possessive: an unterminated one fails once, then `"` alone), a
# bracket, or a run of anything else.
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*+"|[\[\]]|[^"\[\]]+|"')


def tool_result_run(messages: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """Indices of the last run of two or more consecutive tool messages with string content that follows an
    assistant message calling tools; () when there is none."""
    index = len(messages) - 1
    while index >= 0:
        if messages[index].get("role") != "tool":
            index -= 1
            continue
        end = index
        while index >= 0 and messages[index].get("role") == "tool":
            index -= 1
        run = tuple(range(index + 1, end + 1))
        caller = messages[index] if index >= 0 else {}
        ids = [messages[i].get("tool_call_id") for i in run]
        if (
            len(run) >= 2
            and caller.get("role") == "assistant"
            and caller.get("tool_calls")
            and all(isinstance(messages[i].get("content"), str) and messages[i]["content"].strip() for i in run)
            # Each result answers its own call: a result is moved with its id, so ids must tell them apart.
            and all(isinstance(i, str) for i in ids)
            and len(set(ids)) == len(ids)
        ):
            return run
    return ()


def system_document_run(messages: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """Indices of two or more consecutive system or developer messages that all open with the same label;
    the instructions before them (a message that opens otherwise) are not part of the run."""
    best: tuple[int, ...] = ()
    index = 0
    while index < len(messages):
        if messages[index].get("role") not in ("system", "developer"):
            index += 1
            continue
        start = index
        while index < len(messages) and messages[index].get("role") in ("system", "developer"):
            index += 1
        run = _same_opening_suffix(messages, start, index)
        if len(run) >= 2:
            best = run
    return best


def _same_opening_suffix(messages: Sequence[Mapping[str, Any]], start: int, end: int) -> tuple[int, ...]:
    labels = [_opening_label(messages[i].get("content")) for i in range(start, end)]
    last = labels[-1]
    if last is None:
        return ()
    first = len(labels) - 1
    while first > 0 and labels[first - 1] == last:
        first -= 1
    return tuple(range(start + first, end))


def _opening_label(content: Any) -> str | None:
    if not isinstance(content, str):
        return None
    match = _OPENING.match(content)
    return match.group("label").strip().casefold() if match else None


def scan_json_list(text: str, *, objects_only: bool = False) -> list[DocumentSpan]:
    """The items of a JSON list that is the whole of `text` (whitespace aside), when it has two or more items
    and every one is an object with a text field, or (unless `objects_only`: a tool's list of plain strings
    may be ordered steps) a non-empty string; else []."""
    position = skip_json_space(text, 0)
    decoder = json.JSONDecoder()
    closing = ""
    if text.startswith("{", position):
        # `{"results": [...]}` (Onyx's search tool): an object whose one field is the list of results.
        position, closing = _wrapped_list(text, position, decoder)
    if not text.startswith("[", position):
        return []
    try:
        value, end = decoder.raw_decode(text, position)
    except (ValueError, RecursionError):  # ValueError: also an integer past 4,300 digits, which json refuses
        return []
    if not isinstance(value, list) or len(value) < 2 or text[end:].strip() != closing:
        return []
    texts = _item_texts(value)
    if not all(texts) or (objects_only and not all(isinstance(item, Mapping) for item in value)):
        return []
    spans = []
    at = skip_json_space(text, position + 1)
    for item, item_text in zip(value, texts, strict=True):
        _, after = decoder.raw_decode(text, at)
        spans.append(DocumentSpan(start=at, end=after, text=item_text, title=_item_title(item)))
        at = skip_json_space(text, after)
        if text.startswith(",", at):
            at = skip_json_space(text, at + 1)
    return spans


def _wrapped_list(text: str, position: int, decoder: json.JSONDecoder) -> tuple[int, str]:
    """Where the list of an object of one field starts (`{"results": [`), and what closes the object; the text's
    own position and "" where it is no such object."""
    at = skip_json_space(text, position + 1)
    if not text.startswith('"', at):
        return position, ""
    try:
        _, after_key = decoder.raw_decode(text, at)
    except ValueError:
        return position, ""
    colon = skip_json_space(text, after_key)
    if not text.startswith(":", colon):
        return position, ""
    return skip_json_space(text, colon + 1), "}"


def _item_texts(items: list[Any]) -> list[str]:
    """Each item's text: a string item itself, an object's text field; where the objects name none, the field that
    every one of them holds as a string, the longest in all (`{"id": 1, "chunk_text": "..."}`)."""
    texts = [_item_text(item) for item in items]
    if all(texts) or not all(isinstance(item, Mapping) for item in items):
        return texts
    shared = set.intersection(*({k for k, v in item.items() if isinstance(v, str) and v.strip()} for item in items))
    if not shared or any(set(item) != set(items[0]) for item in items):
        return texts  # objects of different kinds: not one list of documents
    if not _names_an_origin(items[0]):
        return texts  # a ticket's history, a dataset: records without a source are no retrieved passages
    field = max(sorted(shared), key=lambda name: sum(len(item[name]) for item in items))
    if any(len(item[field].split()) < _MIN_PASSAGE_WORDS for item in items):
        return texts  # short values of a field no app names for text: records (steps, log lines), not passages
    return [item[field] for item in items]


def _names_an_origin(item: Mapping[str, Any]) -> bool:
    """Whether one of an object's keys says where its text came from (`reference_id`, `source`, `url` ...)."""
    return any(
        _ORIGIN_WORDS.intersection(word.lower() for word in _KEY_WORD.findall(key))
        for key in item
        if isinstance(key, str)
    )


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item.strip()
    if isinstance(item, Mapping):
        for name in TEXT_FIELDS:
            value = item.get(name)
            if isinstance(value, str) and value.strip():
                return value
    return ""


def _item_title(item: Any) -> str | None:
    if isinstance(item, Mapping):
        for name in TITLE_FIELDS:
            if isinstance(item.get(name), str):
                return str(item[name])
    return None


def scan_embedded_json_list(text: str) -> list[DocumentSpan]:
    """The items of the first JSON list in `text` that stands on lines of its own, has two or more items and
    whose every item is an object with a text field holding prose (two words or more) and no `role` (a pasted
    chat transcript is not a set of documents); else []. Offsets are into `text`; the list's brackets and the
    text around it stay where they are.

    Each character is read by at most one decode: a list that fails to parse is not searched again inside the
    text it read, and a nesting too deep to parse ends the search.
    """
    searched_to = 0
    for opening in _LIST_OPENING.finditer(text):
        at = text.index("[", opening.start())
        if at < searched_to:
            continue
        end = _closing_bracket(text, at)
        if end is None:
            return []  # nothing after an unclosed list or string closes a list
        searched_to = end
        if _LINE_END.match(text, end) is None:
            continue
        # Decoded apart from the text: json's error message counts the lines before a failure's position, and
        # in the whole text that cost grew with every failed list.
        try:
            value = json.loads(text[at:end])
        except (ValueError, RecursionError):
            continue
        if _documents_list(value):
            return [
                DocumentSpan(start=span.start + at, end=span.end + at, text=span.text, title=span.title)
                for span in scan_json_list(text[at:end], objects_only=True)
            ]
    return []


def _closing_bracket(text: str, at: int) -> int | None:
    """The offset after the `]` that closes the `[` at `at`, skipping strings; None when nothing closes it."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text, at):
        kind = token.group()
        if kind == "[":
            depth += 1
        elif kind == "]":
            depth -= 1
            if depth == 0:
                return token.end()
        elif kind == '"':
            return None
    return None


def _documents_list(value: Any) -> bool:
    if not isinstance(value, list) or len(value) < 2 or not all(isinstance(item, Mapping) for item in value):
        return False
    texts = _item_texts(value)
    return all("role" not in item and " " in text.strip() for item, text in zip(value, texts, strict=True))


def scan_json_lines(text: str) -> list[DocumentSpan]:
    """The units of a run of JSON objects one to a line (LightRAG's `{"reference_id": "1", "content": "..."}`
    lines in a fenced block): two or more lines in a row, each one whole object of the same keys. A line is a whole
    unit whatever its text holds (a JSON string escapes its line breaks), so no chunk can forge the next one. Where
    several runs stand (LightRAG's entities and relations before its chunks), the one whose objects name a text
    field (`content` ...) holds the documents; several such runs are a guess: []. Lines without a text field (a
    log's `{"ts": ..., "msg": ...}`), without a key naming where the text came from (`reference_id`, `source`,
    `url` ...: a chat export's `{"user": ..., "text": ...}`, a dataset's `{"text": ..., "label": ...}`), with a
    `role` (a transcript) or whose text is no prose (two words or more) are data.

    Each line is decoded once: linear in the text."""
    runs: list[list[tuple[int, int, dict[str, Any]]]] = []
    current: list[tuple[int, int, dict[str, Any]]] = []
    for line in _OBJECT_LINE.finditer(text):
        item = _object(line.group("object"))
        start, end = line.start("object"), line.end("object")
        follows = bool(current) and text.count("\n", current[-1][1], start) == 1
        if item is not None and follows and set(item) == set(current[-1][2]):
            current.append((start, end, item))
            continue
        if len(current) >= 2:
            runs.append(current)
        current = [(start, end, item)] if item is not None else []
    if len(current) >= 2:
        runs.append(current)
    named = [
        run
        for run in runs
        if any(name in run[0][2] for name in TEXT_FIELDS) and "role" not in run[0][2] and _names_an_origin(run[0][2])
    ]
    if len(named) != 1:
        return []
    items = [item for _, _, item in named[0]]
    texts = [_item_text(item) for item in items]
    if not all(" " in text.strip() for text in texts):
        return []  # records of names and codes are data, not passages
    chosen = named
    return [
        DocumentSpan(start=start, end=end, text=item_text, title=_item_title(item))
        for (start, end, item), item_text in zip(chosen[0], texts, strict=True)
    ]


def _object(line: str) -> dict[str, Any] | None:
    """The flat JSON object a line holds (two or more keys, no value a list or an object), or None."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or len(value) < 2 or any(isinstance(v, (dict, list)) for v in value.values()):
        return None
    return value
