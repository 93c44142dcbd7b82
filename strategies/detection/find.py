"""Finding the documents in a chat-completions body, with evidence before action.

Shapes are tried from the most explicit to the most inferred: a format the operator declared for the
model, then the papers' formats (`Document [i](Title: t)`, `<document>` elements, `Document N:` blocks, the KV JSON
object), then a marked context region (`strategies.detection.regions`), numbered markers (in a system prompt only below
a paragraph that announces sources), a tool's JSON list or one pasted on lines of its own into a user message,
and documents spread over messages (tool results, per-document system messages). A request may name one shape
(`format=` on its strategy), and then only that one is tried.

A shape applies only on strong evidence: the documents' count (two or more where they were inferred from a
region's separator or from messages), a question found outside them (unless markers name the documents as
documents), and for the KV object a `Key:` naming one of its records. Otherwise the request is left exactly
as it came, and `ChatRequest.detection` says why (`none: no-context-region`, `single-document`, `no-question`,
`ambiguous`, `ambiguous-chunks` (blank lines alone separate the context's units: `strategies.detection.chunks`),
`non-text-parts` ...).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from contextlift.strategies.detection.apps import APP_TEMPLATES, TemplateMismatch
from contextlift.strategies.detection.chunks import AmbiguousChunks, UnprovenChunks, separator_line_in
from contextlift.strategies.detection.declared import DeclaredFormat, declared_for
from contextlift.strategies.detection.documents_field import DOCUMENTS_FIELD, from_documents_field
from contextlift.strategies.detection.elements import scan_elements
from contextlift.strategies.detection.formats import SCANNERS, AmbiguousElements
from contextlift.strategies.detection.limits import DocumentLimitError, DocumentLimits
from contextlift.strategies.detection.message_documents import (
    scan_embedded_json_list,
    scan_json_lines,
    scan_json_list,
    system_document_run,
    tool_result_run,
)
from contextlift.strategies.detection.numbered import AmbiguousNumbering, announces_sources, scan_numbered
from contextlift.strategies.detection.question import find_question, question_lines, worked_example_in
from contextlift.strategies.detection.regions import Region, RegionTooLarge, find_region, split_region
from contextlift.strategies.request import (
    ChatRequest,
    Document,
    DocumentBlock,
    asking_turn,
    last_user_text,
    text_of,
)
from contextlift.strategies.spans import DocumentFormat, DocumentSpan

_SEARCHED_ROLES = ("user", "system", "developer", "tool")
_INFERRED = (
    DocumentFormat.PARAGRAPHS,
    DocumentFormat.SEPARATED,
    DocumentFormat.METADATA,
    DocumentFormat.MESSAGES,
    DocumentFormat.JSON_LIST,
)
"""Formats read from a separator rather than from markers that name documents: they need two or more."""
_NEED_QUESTION = (*_INFERRED, DocumentFormat.NUMBERED)
"""Formats whose markers could be an ordinary list (`[1]`, a `Context:` label): a question found outside the
documents is part of their evidence. `Document [1]`, `<document>` and `Document 1:` name documents themselves."""
_TAG = re.compile(r"</?[A-Za-z][\w.:-]{0,40}(?:[ \t][^<>\n]{0,1000})?>")
_REASON_RANK = (
    "no-context-region",
    "no-question",
    "single-document",
    "ambiguous",
    "ambiguous-chunks",
    "unproven-boundaries",
    "unproven-template",
    "non-text-parts",
    "over-limit",
)
"""When several candidates fell short, the reason reported is the one furthest along this list."""

SHAPES = tuple(f.value for f in DocumentFormat if f is not DocumentFormat.DECLARED)
"""Shape names a request may name with `format=`, besides the operator's declared formats."""
DECLINED = (*_REASON_RANK, "unrecognised-documents-field")
"""Every reason a reading of a request's documents is declined for (`X-Context-Format: none: REASON`)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    format: DocumentFormat
    spans: list[DocumentSpan]
    label: str
    why: tuple[str, ...] = ()
    """What made the reading a guess (`a Markdown heading`), for `contextlift detect`."""
    asked: str = ""
    """The question where the reading's template puts it (an app's template), found before any other."""
    needs_question: bool = False
    """Units whose markers say nothing of documents (elements of any tag name): evidence only beside a question
    found outside them, as `_NEED_QUESTION`'s formats are."""
    unproven: str | None = None
    """Why the reading's boundaries are a guess (`ambiguous-chunks`: blank-line paragraphs, where a chunk's own
    break cannot be told from a join; `unproven-boundaries`: separators that marked-up chunks hold too): judged
    like any candidate, so that the reason given is the right one, and never moved (`ChatRequest.unmovable`)."""


class _Reasons:
    """Why candidates were turned down; the most telling one is reported."""

    def __init__(self) -> None:
        self.worst = 0
        self.details: dict[str, str] = {}

    def add(self, reason: str, why: str = "") -> None:
        """Note a reason, with what in the request gave it (the first one given for each reason is kept)."""
        self.worst = max(self.worst, _REASON_RANK.index(reason))
        if why:
            self.details.setdefault(reason, why)

    def text(self) -> str:
        return f"none: {_REASON_RANK[self.worst]}"

    def why(self) -> str:
        """What in the request gave the reason reported, or ""."""
        return self.details.get(_REASON_RANK[self.worst], "")


def parse_request(
    body: Mapping[str, Any],
    limits: DocumentLimits | None = None,
    *,
    declared: Sequence[DeclaredFormat] = (),
    shape: str | None = None,
) -> ChatRequest:
    """Split a validated chat-completions body into instructions, documents and question.

    Documents come from the `documents` body field when present, else from the messages: the last user
    message first, then the others from last to first, then runs of messages. A pure function of its
    arguments, in time linear in the body's size: safe to run in a worker thread.

    Args:
        body: the client's chat-completions body, already checked to hold a list of messages.
        limits: the most documents and document bytes the request may carry; None: unbounded.
        declared: the operator's declared formats; those that apply to the body's model are tried first.
        shape: a shape the request named (a `SHAPES` value or a declared format's name): only it is tried.

    Raises:
        DocumentFieldError: the `documents` field is malformed.
        DocumentLimitError: the documents found, or given in the `documents` field, exceed `limits`; checked
            before objects are built for more documents than the limit.
    """
    if DOCUMENTS_FIELD in body:
        return from_documents_field(body, limits)
    messages = body["messages"]
    model = body.get("model") if isinstance(body.get("model"), str) else None
    formats = declared_for(declared, model) if shape is None else []
    if shape is not None and shape not in SHAPES:
        # Named by the request: the operator's format whatever models it lists for unnamed requests.
        formats = [f for f in declared if f.name == shape]
    reasons = _Reasons()
    search = _Search(body, limits, formats, shape, reasons)
    found = search.in_texts() or search.in_message_runs()
    if found is not None:
        return found
    return ChatRequest(
        body=body,
        question=last_user_text(messages),
        detection=reasons.text(),
        unmovable=search.unmovable,
        notes=(reasons.why(),) if reasons.why() else (),
    )


class _Search:
    def __init__(
        self,
        body: Mapping[str, Any],
        limits: DocumentLimits | None,
        declared: list[DeclaredFormat],
        shape: str | None,
        reasons: _Reasons,
    ) -> None:
        self.body = body
        self.messages: Sequence[Mapping[str, Any]] = body["messages"]
        self.limits = limits
        self.declared = declared
        self.shape = shape
        self.reasons = reasons
        self.most = None if limits is None else limits.max_documents + 1
        # Found once: reading the later messages again for each candidate made a long chat cost its square.
        self.last_user = asking_turn(self.messages, _last_user_index(self.messages))
        self.unmovable: ChatRequest | None = None
        """The first context declined as `ambiguous-chunks` that would otherwise have been read."""

    def latest_user_text(self, index: int, *, before: bool = False) -> str:
        """The latest user turn after message `index` (what is asked now); with `before`, the latest anywhere
        (tool results answer a question asked before them)."""
        if self.last_user > index or (before and self.last_user >= 0):
            return text_of(self.messages[self.last_user])
        return ""

    def in_texts(self) -> ChatRequest | None:
        for index in _search_order(self.messages):
            content = self.messages[index].get("content")
            if isinstance(content, str):
                found = self._in_text(content, index, None)
            elif isinstance(content, list):
                found = self._in_parts(content, index)
            else:
                found = None
            if found is not None:
                return found
        return None

    def in_message_runs(self) -> ChatRequest | None:
        if self.shape not in (None, DocumentFormat.MESSAGES.value):
            return None
        for run in (tool_result_run(self.messages), system_document_run(self.messages)):
            if not run:
                continue
            if self.most is not None and len(run) >= self.most:
                self.reasons.add("over-limit", f"{len(run)} or more messages in a run, past max_documents")
                continue
            role = self.messages[run[0]].get("role")
            block = DocumentBlock(
                format=DocumentFormat.MESSAGES,
                message_index=run[0],
                part_index=None,
                head="",
                separators=(),
                tail="",
                numbering_base=None,
                message_indices=run,
                calling_message=run[0] - 1 if role == "tool" else None,
            )
            documents = tuple(
                Document(text=self.messages[i]["content"], raw=self.messages[i]["content"], message=self.messages[i])
                for i in run
            )
            question = find_question("", "", self.latest_user_text(run[-1], before=True))
            if not question:
                self.reasons.add("no-question", f"messages {run[0]} to {run[-1]} read as documents, no user turn asks")
                continue
            if not self._within_limits(DocumentFormat.MESSAGES, [d.text for d in documents]):
                continue
            return self._request(block, documents, question, f"messages; role={role}")
        return None

    def _in_parts(self, content: list[Any], index: int) -> ChatRequest | None:
        texts = [i for i, p in enumerate(content) if isinstance(p, Mapping) and p.get("type") == "text"]
        if self.limits is not None:
            # Text parts are the documents when none of them holds a format: past the limit, refuse them before
            # scanning every one, so that the work stays within what the limit allows.
            self.limits.check_count(len(texts) - 1)
        for position in texts:
            text = content[position].get("text")
            if isinstance(text, str):
                found = self._in_text(text, index, position)
                if found is not None:
                    return found
        if len(texts) < 3 or not all(isinstance(content[i].get("text"), str) for i in texts):
            return None
        if self.shape not in (None, DocumentFormat.PARTS.value):
            return None
        text_set = set(texts)
        if any(i not in text_set for i in range(texts[0], texts[-2] + 1)):
            # An image between two documents belongs with one of them, and moving text around it would
            # separate them: such a message is left alone.
            self.reasons.add("non-text-parts", f"message {index} has an image or other part between two text parts")
            return None
        return self._parts(content, index, texts)

    def _parts(self, content: list[Any], index: int, texts: list[int]) -> ChatRequest | None:
        *doc_positions, question_position = texts
        if self.limits is not None:
            self.limits.check_bytes(content[i]["text"] for i in doc_positions)
        documents = tuple(
            Document(text=content[i]["text"], raw=content[i]["text"], part=content[i]) for i in doc_positions
        )
        block = DocumentBlock(
            format=DocumentFormat.PARTS,
            message_index=index,
            part_index=None,
            head="",
            separators=(),
            tail=content[question_position]["text"],
            numbering_base=None,
        )
        question = find_question("", block.tail, self.latest_user_text(index))
        if not question:
            self.reasons.add("no-question", f"message {index}'s text parts read as documents, and none after asks")
            return None
        return self._request(block, documents, question, DocumentFormat.PARTS.value)

    def _in_text(self, text: str, index: int, part_index: int | None) -> ChatRequest | None:
        if self.limits is not None and len(text) > self.limits.max_scanned_chars:
            # Left as it came: the scan would stall the process (DocumentLimits).
            self.reasons.add(
                "over-limit",
                f"message {index} holds {len(text):,} characters, past max_scanned_chars "
                f"({self.limits.max_scanned_chars:,})",
            )
            return None
        role = self.messages[index].get("role")
        for candidate in self._candidates(text, role):
            if candidate.format in _INFERRED and self.most is not None and len(candidate.spans) >= self.most:
                self.reasons.add("over-limit", f"{candidate.label} in message {index}: more pieces than max_documents")
                continue
            pieces = [text[s.start : s.end] for s in candidate.spans]
            if candidate.format not in _NEED_QUESTION and candidate.format is not DocumentFormat.JSON_KV:
                # Markers that name documents are documents whatever else the text holds: refused past the
                # limits before anything else is built (the text after them would be copied for nothing).
                self._within_limits(candidate.format, pieces)
            # Judged before the limits: an ordinary prompt that only looks like too many documents (a JSON
            # object of 2,001 labels, a numbered log) goes upstream untouched rather than refused.
            found = self._judged(text, candidate, index, part_index)
            if found is not None and candidate.unproven is not None:
                self.reasons.add(candidate.unproven, candidate.why[0] if candidate.why else "")
                self.unmovable = self.unmovable or replace(found, notes=candidate.why)
                continue
            if found is not None and self._within_limits(candidate.format, pieces):
                return found
        return None

    def _within_limits(self, fmt: DocumentFormat, texts: list[str]) -> bool:
        """Whether accepted documents are within the limits. Past them, documents that markers name are
        refused (`DocumentLimitError`); pieces read from a separator are no evidence of documents: left alone."""
        if self.limits is None:
            return True
        try:
            self.limits.check_count(len(texts))
            self.limits.check_bytes(texts)
        except DocumentLimitError:
            if fmt not in _NEED_QUESTION:  # numbered markers could be a log's lines: left alone, not refused
                raise
            self.reasons.add("over-limit", f"{len(texts)} {fmt.value} pieces past max_documents or max_document_bytes")
            return False
        return True

    def _candidates(self, text: str, role: Any) -> Iterator[_Candidate]:
        for declared in self.declared:
            spans = declared.scan(text)
            if spans:
                yield _Candidate(DocumentFormat.DECLARED, spans, f"declared:{declared.name}")
        if self.shape is not None and self.shape not in SHAPES:
            return
        if self._allows(DocumentFormat.APP) and (yield from self._app_candidates(text)):
            # An app's template whose units are not proven: whatever else reads as units there sits in its chunks.
            return
        # Read once: the scanners' units are judged against it, and it is a candidate of its own.
        region = find_region(text)
        for fmt, scan in SCANNERS:
            if self._allows(fmt):
                try:
                    spans = list(itertools.islice(scan(text), self.most))
                except AmbiguousElements as ambiguity:
                    self.reasons.add("ambiguous", f"{fmt.value}: {ambiguity}")
                    continue
                if spans and not self._nested(text, spans, fmt, region):
                    yield _Candidate(fmt, spans, fmt.value)
        if self._allows(DocumentFormat.XML):
            elements = scan_elements(text)
            if elements is not None and not self._nested(text, elements.spans, DocumentFormat.XML, region):
                spans = elements.spans[: self.most]
                label = f"{DocumentFormat.XML.value}; tag={elements.tag}"
                yield _Candidate(DocumentFormat.XML, spans, label, needs_question=True)
        yield from self._region_candidates(text, region)
        if self._allows(DocumentFormat.NUMBERED):
            yield from self._numbered_candidates(text, role, region)
        if role == "tool" and self._allows(DocumentFormat.JSON_LIST):
            items = scan_json_list(text, objects_only=True)
            if items:
                yield _Candidate(DocumentFormat.JSON_LIST, items, DocumentFormat.JSON_LIST.value)
        elif role == "user" and self._allows(DocumentFormat.JSON_LIST):
            items = list(itertools.islice(scan_embedded_json_list(text), self.most))
            if items:
                yield _Candidate(DocumentFormat.JSON_LIST, items, f"{DocumentFormat.JSON_LIST.value}; embedded")
        if self._allows(DocumentFormat.JSON_LIST):
            # Whole objects one to a line prove their own bounds wherever they stand: no region judges them.
            lines = scan_json_lines(text)[: self.most]
            if lines:
                yield _Candidate(DocumentFormat.JSON_LIST, lines, f"{DocumentFormat.JSON_LIST.value}; lines")

    def _app_candidates(self, text: str) -> Generator[_Candidate, None, bool]:
        """The readings of the app templates whose sentences `text` holds; returns whether one of them did not prove
        its units."""
        mismatched = False
        for template in APP_TEMPLATES:
            try:
                spans = template.scan(text)
            except TemplateMismatch as mismatch:
                self.reasons.add("unproven-template", f"{template.name}'s template, {mismatch}")
                mismatched = True
                continue
            if spans:
                label = f"{DocumentFormat.APP.value}; template={template.name}"
                yield _Candidate(DocumentFormat.APP, spans, label, asked=template.asked(text))
        return mismatched

    def _numbered_candidates(self, text: str, role: Any, region: Region | None) -> Iterator[_Candidate]:
        instructions = role in ("system", "developer")
        try:
            numbered = list(itertools.islice(scan_numbered(text), self.most))
        except AmbiguousNumbering as ambiguity:
            if not instructions:
                self.reasons.add("ambiguous", f"numbered markers: {ambiguity}")
            return
        if not numbered or self._nested(text, numbered, DocumentFormat.NUMBERED, region):
            return
        if not instructions:
            yield _Candidate(DocumentFormat.NUMBERED, numbered, DocumentFormat.NUMBERED.value)
        # In a system prompt, `[1] Be concise.` lines are rules, and the later user turn would pass for their
        # question: there they are sources only when the paragraph above them says so.
        elif announces_sources(text, numbered[0].start):
            yield _Candidate(DocumentFormat.NUMBERED, numbered, f"{DocumentFormat.NUMBERED.value}; announced")

    def _region_candidates(self, text: str, region: Region | None) -> Iterator[_Candidate]:
        if region is None:
            return
        unproven = None
        why: tuple[str, ...] = ()
        labels = None
        try:
            try:
                fmt, spans, labels = split_region(
                    text, region, self.most, one_paragraph_each=self.shape == "paragraphs"
                )
            except AmbiguousChunks:
                # A chunk's own paragraph break and the break between two chunks look the same: moving either
                # would cut a chunk in two. `format=paragraphs` says each document is one paragraph.
                fmt, spans, _ = split_region(text, region, self.most, one_paragraph_each=True)
                unproven = "ambiguous-chunks"
            except UnprovenChunks as guess:
                # Marked-up chunks may hold the join's own mark: `format=separated` says they do not.
                fmt, spans = DocumentFormat.SEPARATED, guess.chunks[: self.most]
                unproven = None if self.shape == fmt.value else "unproven-boundaries"
                why = (str(guess),)
        except AmbiguousNumbering as ambiguity:
            self.reasons.add("ambiguous", f"numbered markers in the {region.marker} region: {ambiguity}")
            return
        except RegionTooLarge:
            self.reasons.add("over-limit", f"the {region.marker} region splits into more pieces than max_documents")
            return
        if unproven is not None and self.shape is None:
            yield _Candidate(fmt, spans, f"{fmt.value}; region={region.marker}", why=why, unproven=unproven)
        elif self._allows(fmt) and spans:
            proof = f"; labels={labels}" if labels else ""
            yield _Candidate(fmt, spans, f"{fmt.value}; region={region.marker}{proof}")

    def _nested(self, text: str, spans: list[DocumentSpan], fmt: DocumentFormat, region: Region | None) -> bool:
        """Whether units found over the whole text sit inside something larger, and so prove nothing: text of
        its own between two of them (they are pieces of one chunk), or a marked context region that holds them
        with other text before them, or a separator line after them (they are one chunk's quotation). A request
        that names the shape says they are the documents."""
        if self.shape == fmt.value:
            return False
        gaps = {text[a.end : b.start].strip() for a, b in itertools.pairwise(spans)}
        if len(gaps) > 1 or any(c.isalnum() for gap in gaps for c in gap):
            return True
        if region is None or not (region.start <= spans[0].start and spans[-1].end <= region.end):
            return False
        # A wrapper's own tags before the units (Perplexica's `<search_results note=...>` inside its `<context>`) are
        # no text of a chunk.
        before = _TAG.sub("", text[region.start : spans[0].start])
        return bool(before.strip()) or separator_line_in(text, spans[-1].end, region.end)

    def _allows(self, fmt: DocumentFormat) -> bool:
        return self.shape is None or self.shape == fmt.value

    def _judged(self, text: str, candidate: _Candidate, index: int, part_index: int | None) -> ChatRequest | None:
        spans = candidate.spans
        named = candidate.format is DocumentFormat.DECLARED or self.shape is not None
        if len(spans) < 2 and candidate.format in _INFERRED and not named:
            self.reasons.add("single-document", f"{candidate.label} in message {index} reads as one piece")
            return None
        block, documents = _block_from_spans(text, spans, candidate.format, index, part_index)
        # A tool's results answer the question asked before the call; elsewhere a later turn is what is asked now.
        role = self.messages[index].get("role")
        # Spans cut at the limit leave later documents in the tail: only a cue line there is a question.
        truncated = self.most is not None and len(spans) >= self.most
        later = self.latest_user_text(index, before=role == "tool")
        guessed_end = candidate.format in _NEED_QUESTION and not candidate.asked
        # The context was read to end at the first cue line after it. A second question line below it, or an answer
        # written out, says that line may be a chunk's own worked example, whose rest a move would leave behind.
        if guessed_end and not later and question_lines(block.tail) > 1:
            self.reasons.add("ambiguous", f"two question lines after the {candidate.label} in message {index}")
            return None
        if guessed_end and worked_example_in(block.tail):
            self.reasons.add("ambiguous", f"a worked example's answer after the {candidate.label} in message {index}")
            return None
        question = candidate.asked or find_question(block.head, block.tail, later, bare=not truncated)
        if candidate.format is DocumentFormat.JSON_KV and not _names_a_record(question, spans):
            # An ordinary JSON object in a prompt is not a key-value task: only a `Key:` naming a record is.
            self.reasons.add("no-question", f"a JSON object in message {index}, and no `Key:` line names a record")
            return None
        if not question and not named and (candidate.format in _NEED_QUESTION or candidate.needs_question):
            self.reasons.add(
                "no-question", f"{len(spans)} documents read as {candidate.label} in message {index}, and no question"
            )
            return None
        return self._request(block, documents, question, candidate.label)

    def _request(self, block: DocumentBlock, documents: tuple[Document, ...], question: str, label: str) -> ChatRequest:
        return ChatRequest(
            body=self.body,
            documents=documents,
            block=block,
            question=question,
            instructions=block.head.strip(),
            detection=label,
        )


def _names_a_record(question: str, spans: list[DocumentSpan]) -> bool:
    key = question.strip().strip("\"'`")
    return any(s.title == key for s in spans)


def _block_from_spans(
    text: str, spans: list[DocumentSpan], fmt: DocumentFormat, index: int, part_index: int | None
) -> tuple[DocumentBlock, tuple[Document, ...]]:
    numbers = [s.number for s in spans]
    base = next((b for b in (1, 0) if numbers == list(range(b, b + len(spans)))), None)
    if base is not None and not all(_plain_number(text, s) for s in spans):
        base = None  # "Document [01]": renumbering would not reproduce the original text
    if fmt is DocumentFormat.XML:
        base = None  # an element's `index` or `id` is the app's label, which its citations map back: never rewritten
    block = DocumentBlock(
        format=fmt,
        message_index=index,
        part_index=part_index,
        head=text[: spans[0].start],
        separators=tuple(text[a.end : b.start] for a, b in itertools.pairwise(spans)),
        tail=text[spans[-1].end :],
        numbering_base=base,
    )
    documents = tuple(
        Document(text=s.text, title=s.title, raw=text[s.start : s.end], number_span=s.number_span) for s in spans
    )
    return block, documents


def _plain_number(text: str, span: DocumentSpan) -> bool:
    if span.number_span is None:
        return False
    start, end = span.number_span
    return text[span.start + start : span.start + end] == str(span.number)


def _search_order(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    candidates = [i for i, m in enumerate(messages) if m.get("role") in _SEARCHED_ROLES]
    users = [i for i in candidates if messages[i].get("role") == "user"]
    first = users[-1:] if users else []
    return first + [i for i in reversed(candidates) if i not in first]


def _last_user_index(messages: Sequence[Mapping[str, Any]]) -> int:
    """Index of the chat's last user turn, -1 without one."""
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), -1)
