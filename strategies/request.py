"""The chat request as strategies see it: instructions, an ordered list of documents, and the question.

`parse_request` finds the documents in an OpenAI chat-completions body; `ChatRequest.render` writes the body
back. A request rendered without changes reproduces the original messages exactly: the text around and
between the documents is kept verbatim, and each document keeps its raw text, only its positional number
being rewritten when it moves.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from strategies.formats import SCANNERS, DocumentFormat, DocumentSpan, render_litm_line
from strategies.limits import DocumentLimits

DOCUMENTS_FIELD = "documents"
"""Body field in which a client may pass documents as a list of strings or `{"title", "text"}` objects."""

_QUESTION_LINE = re.compile(r"(?im)^[ \t]*(?:question|query|q|key)[ \t]*:[ \t]*(?P<q>.+)$")
_SEARCHED_ROLES = ("user", "system", "developer")


class DocumentFieldError(ValueError):
    """The `documents` body field is not a list of strings or `{"title", "text"}` objects."""


@dataclass(frozen=True, slots=True)
class Document:
    """One document, with the exact text it was written as."""

    text: str
    title: str | None = None
    raw: str = ""
    """The document as it appeared in the request; empty for a document a strategy made up."""
    number_span: tuple[int, int] | None = None
    """Where the positional number sits in `raw`, so the document can be renumbered when it moves."""
    part: Mapping[str, Any] | None = None
    """For documents given as content parts: the whole part, so fields beside `text` survive."""

    def rendered(self, number: int | None, fmt: DocumentFormat) -> str:
        """The document's text in its request, carrying `number` where its format numbers documents."""
        if not self.raw:
            return render_litm_line(number or 1, self.text, self.title) if fmt is DocumentFormat.LITM else self.text
        if number is None or self.number_span is None:
            return self.raw
        start, end = self.number_span
        return f"{self.raw[:start]}{number}{self.raw[end:]}"

    def as_part(self) -> dict[str, Any]:
        """The document as a text content part, keeping the fields of the part it came from."""
        return {**(self.part or {"type": "text"}), "text": self.text}


@dataclass(frozen=True, slots=True)
class DocumentBlock:
    """Where the documents sit in the request, and the text around them."""

    format: DocumentFormat
    message_index: int
    part_index: int | None
    """Index of the content part holding the documents, when the message content is a list."""
    head: str
    """Text before the first document: the instructions, as far as this message holds them."""
    separators: tuple[str, ...]
    """Text between consecutive documents."""
    tail: str
    """Text after the last document: usually the question."""
    numbering_base: int | None
    """1 (or 0) when documents carry their position as a number (`Document [1]` ...), else None."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A chat-completions request split into instructions, documents and question.

    `body` holds every field of the client's body except the control fields this package consumes, with the
    messages as the client sent them; `render` rebuilds the body with the current documents in place.
    """

    body: Mapping[str, Any]
    documents: tuple[Document, ...] = ()
    block: DocumentBlock | None = None
    question: str = ""
    instructions: str = ""
    notes: tuple[str, ...] = field(default=())
    """Facts about parsing worth reporting to the client (e.g. a format assumption)."""

    @property
    def messages(self) -> list[Mapping[str, Any]]:
        """The client's messages."""
        return list(self.body["messages"])

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed response."""
        return bool(self.body.get("stream"))

    def with_documents(self, documents: Sequence[Document]) -> ChatRequest:
        """The same request with these documents, in this order, in place of the current ones."""
        return replace(self, documents=tuple(documents))

    def with_block_text(self, *, head: str | None = None, tail: str | None = None) -> ChatRequest:
        """The same request with new text before or after the documents."""
        if self.block is None:
            raise ValueError("request has no documents")
        block = replace(
            self.block,
            head=self.block.head if head is None else head,
            tail=self.block.tail if tail is None else tail,
        )
        return replace(self, block=block)

    def render(self) -> dict[str, Any]:
        """The body to send upstream."""
        body = dict(self.body)
        if self.block is None:
            return body
        messages = [dict(m) for m in self.body["messages"]]
        target = messages[self.block.message_index]
        if self.block.format is DocumentFormat.PARTS:
            target["content"] = self._render_parts(target["content"])
        elif self.block.part_index is None:
            target["content"] = self._render_text()
        else:
            parts = [dict(p) for p in target["content"]]
            parts[self.block.part_index]["text"] = self._render_text()
            target["content"] = parts
        body["messages"] = messages
        return body

    def documents_text(self) -> str:
        """The documents alone, as this request renders them (numbered where the format numbers them)."""
        if self.block is None:
            return ""
        if self.block.format is DocumentFormat.PARTS:
            return "\n\n".join(d.text for d in self.documents)
        out = []
        for position, document in enumerate(self.documents):
            if position:
                out.append(_separator(self.block.separators, position - 1))
            number = None if self.block.numbering_base is None else self.block.numbering_base + position
            out.append(document.rendered(number, self.block.format))
        return "".join(out)

    def _render_text(self) -> str:
        assert self.block is not None
        return self.block.head + self.documents_text() + self.block.tail

    def _render_parts(self, content: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        text_positions = [i for i, part in enumerate(content) if part.get("type") == "text"]
        slots = text_positions[:-1]
        rendered = [dict(p) for p in content]
        if len(self.documents) == len(slots):
            for slot, document in zip(slots, self.documents, strict=True):
                rendered[slot] = document.as_part()
            return rendered
        # A different number of documents: they take the place of the first slot, other parts keep their order.
        # A set: membership in the list of slots made this the square of the number of parts.
        document_slots = set(slots)
        kept = [part for i, part in enumerate(rendered) if i not in document_slots]
        return kept[: slots[0]] + [d.as_part() for d in self.documents] + kept[slots[0] :]


def _separator(separators: tuple[str, ...], index: int) -> str:
    if not separators:
        return "\n"
    return separators[index] if index < len(separators) else separators[-1]


def parse_request(body: Mapping[str, Any], limits: DocumentLimits | None = None) -> ChatRequest:
    """Split a validated chat-completions body into instructions, documents and question.

    Documents come from the `documents` body field when present, else from the first message, searching
    the last user message first and then the others from last to first, in which a document format is found.

    A pure function of its arguments, in time linear in the body's size: safe to run in a worker thread.

    Args:
        body: the client's chat-completions body, already checked to hold a list of messages.
        limits: the most documents and document bytes the request may carry; None: unbounded.

    Raises:
        DocumentFieldError: the `documents` field is malformed.
        DocumentLimitError: the documents found, or given in the `documents` field, exceed `limits`; checked
            before objects are built for more documents than the limit.
    """
    if DOCUMENTS_FIELD in body:
        return _from_documents_field(body, limits)
    messages = body["messages"]
    for index in _search_order(messages):
        found = _find_in_message(messages[index], index, limits)
        if found is not None:
            block, documents = found
            return ChatRequest(
                body=body,
                documents=documents,
                block=block,
                question=_question(block, messages),
                instructions=block.head.strip(),
            )
    return ChatRequest(body=body, question=_last_user_text(messages))


def _search_order(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    candidates = [i for i, m in enumerate(messages) if m.get("role") in _SEARCHED_ROLES]
    users = [i for i in candidates if messages[i].get("role") == "user"]
    first = users[-1:] if users else []
    return first + [i for i in reversed(candidates) if i not in first]


_Found = tuple[DocumentBlock, tuple[Document, ...]]


def _find_in_message(message: Mapping[str, Any], index: int, limits: DocumentLimits | None) -> _Found | None:
    content = message.get("content")
    if isinstance(content, str):
        return _find_in_text(content, index, None, limits)
    if not isinstance(content, list):
        return None
    text_positions = [i for i, p in enumerate(content) if isinstance(p, Mapping) and p.get("type") == "text"]
    if limits is not None:
        # Text parts are the documents when none of them holds a format: past the limit, refuse them before
        # scanning every one, so that the work stays within what the limit allows.
        limits.check_count(len(text_positions) - 1)
    for position in text_positions:
        text = content[position].get("text")
        if isinstance(text, str):
            found = _find_in_text(text, index, position, limits)
            if found is not None:
                return found
    if len(text_positions) >= 3 and all(isinstance(content[i].get("text"), str) for i in text_positions):
        return _parts_block(content, index, text_positions, limits)
    return None


def _find_in_text(text: str, index: int, part_index: int | None, limits: DocumentLimits | None) -> _Found | None:
    # One span past the limit is enough to refuse the request: the scan stops there.
    most = None if limits is None else limits.max_documents + 1
    for fmt, scan in SCANNERS:
        spans = list(itertools.islice(scan(text), most))
        if spans:
            if limits is not None:
                limits.check_count(len(spans))
                limits.check_bytes(text[s.start : s.end] for s in spans)
            return _block_from_spans(text, spans, fmt, index, part_index)
    return None


def _block_from_spans(
    text: str, spans: list[DocumentSpan], fmt: DocumentFormat, index: int, part_index: int | None
) -> tuple[DocumentBlock, tuple[Document, ...]]:
    numbers = [s.number for s in spans]
    base = next((b for b in (1, 0) if numbers == list(range(b, b + len(spans)))), None)
    if base is not None and not all(_plain_number(text, s) for s in spans):
        base = None  # "Document [01]": renumbering would not reproduce the original text
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


def _parts_block(
    content: Sequence[Mapping[str, Any]], index: int, text_positions: list[int], limits: DocumentLimits | None
) -> _Found:
    *doc_positions, question = text_positions
    if limits is not None:
        limits.check_count(len(doc_positions))
        limits.check_bytes(content[i]["text"] for i in doc_positions)
    documents = tuple(Document(text=content[i]["text"], raw=content[i]["text"], part=content[i]) for i in doc_positions)
    block = DocumentBlock(
        format=DocumentFormat.PARTS,
        message_index=index,
        part_index=None,
        head="",
        separators=(),
        tail=content[question]["text"],
        numbering_base=None,
    )
    return block, documents


def _question(block: DocumentBlock, messages: Sequence[Mapping[str, Any]]) -> str:
    for text in (block.tail, _later_user_text(messages, block.message_index), block.head):
        match = _QUESTION_LINE.search(text)
        if match:
            return match.group("q").strip()
        if text.strip():
            return text.strip()
    return ""


def _later_user_text(messages: Sequence[Mapping[str, Any]], after: int) -> str:
    later = [m for m in messages[after + 1 :] if m.get("role") == "user"]
    return _text_of(later[-1]) if later else ""


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    return _text_of(users[-1]).strip() if users else ""


def _text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _from_documents_field(body: Mapping[str, Any], limits: DocumentLimits | None) -> ChatRequest:
    documents = _documents_from_field(body[DOCUMENTS_FIELD], limits)
    rest = {k: v for k, v in body.items() if k != DOCUMENTS_FIELD}
    messages = [dict(m) for m in rest["messages"]]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not documents:
        return ChatRequest(body=rest, question=_last_user_text(messages))
    if users:
        index = users[-1]
        question_text = _text_of(messages[index])
    else:
        messages.append({"role": "user", "content": ""})
        index, question_text = len(messages) - 1, ""
    block = DocumentBlock(
        format=DocumentFormat.LITM,
        message_index=index,
        part_index=None,
        head="",
        separators=("\n",) * (len(documents) - 1),
        tail="\n\n" + question_text if question_text else "",
        numbering_base=1,
    )
    # The target message becomes plain text: the documents are rendered into it on the way out.
    messages[index] = {**messages[index], "content": question_text}
    rest["messages"] = messages
    request = ChatRequest(body=rest, documents=documents, block=block, instructions="")
    return replace(request, question=_question(block, messages))


def _documents_from_field(value: Any, limits: DocumentLimits | None) -> tuple[Document, ...]:
    if not isinstance(value, list):
        raise DocumentFieldError('\'documents\' must be a list of strings or {"title", "text"} objects')
    if limits is not None:
        limits.check_count(len(value))  # before a single object is built for them
        limits.check_bytes(_field_texts(value))
    documents = []
    for position, item in enumerate(value, start=1):
        if isinstance(item, str):
            text, title = item, None
        elif isinstance(item, Mapping) and isinstance(item.get("text"), str):
            title = item.get("title")
            if title is not None and not isinstance(title, str):
                raise DocumentFieldError(f"'documents[{position - 1}].title' must be a string")
            text = item["text"]
        else:
            raise DocumentFieldError(f"'documents[{position - 1}]' must be a string or an object with a 'text' string")
        raw = render_litm_line(position, text, title)
        prefix = len("Document [")
        documents.append(Document(text=text, title=title, raw=raw, number_span=(prefix, prefix + len(str(position)))))
    return tuple(documents)


def _field_texts(items: list[Any]) -> Iterator[str]:
    """The texts and titles of the `documents` field's items; malformed items are reported later, in order."""
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            for key in ("title", "text"):
                if isinstance(item.get(key), str):
                    yield item[key]
