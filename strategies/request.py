"""The chat request as strategies see it: instructions, an ordered list of documents, and the question.

`parse_request` finds the documents in an OpenAI chat-completions body; `ChatRequest.render` writes the body
back. A request rendered without changes reproduces the original messages exactly: the text around and
between the documents is kept verbatim, and each document keeps its raw text, only its positional number
being rewritten when it moves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contextlift.strategies.spans import DocumentFormat, render_litm_line

# A turn or a closing line that tells the model how to answer, not what: "Please respond in the same language as the
# user's question.", Onyx's `<system-reminder>` turn after the question ("Remember to provide inline citations ...").
_APP_REMINDER = re.compile(r"(?is)\A\s*<(?P<tag>system-reminder|reminder)>.*</(?P=tag)>\s*\Z")
"""A turn an app sends after the user's (Onyx's `<system-reminder>`); an `<instructions>Translate ...</instructions>`
turn asks."""
_REMINDER = re.compile(r"(?is)\A\s*<(?P<tag>system-reminder|reminder|instructions?)>.*</(?P=tag)>\s*\Z")
_ABOUT_THE_QUESTION = re.compile(
    r"(?i)\b(?:the|this|that|user'?s|your|my)[ \t]+(?:question|query|request)\b|\bsame language\b"
)
"""What a line that instructs about the question says: it names the question in the third person ("the user's
question", "the same language as the query"); a line that asks names what it asks about instead."""
_IMPERATIVE = re.compile(
    r"(?i)[ \t]*(?:(?:please|always|now)[ \t,]+)?(?:remember[ \t]+to|respond|reply|answer|write|provide|cite|use|"
    r"make[ \t]+sure|be[ \t]+sure|do[ \t]+not|don't|never|keep|format)\b"
)
_MAX_INSTRUCTION_CHARS = 4_000
"""An instruction is a few lines: a longer text is not read for one."""
_MAX_TURNS_BACK = 4
"""Instruction turns passed over, at most, looking for the user's question before them."""


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
    message: Mapping[str, Any] | None = None
    """For documents that are whole messages: the message, so its role and `tool_call_id` survive."""

    def derived(self, text: str) -> Document:
        """A document a strategy made from this one (evidence, a fact): its text in this one's place."""
        return Document(text=text, title=self.title, part=self.part, message=self.message)

    def rendered(self, number: int | None, fmt: DocumentFormat) -> str:
        """The document's text in its request, carrying `number` where its format numbers documents."""
        if not self.raw:
            if fmt is DocumentFormat.LITM:
                return render_litm_line(number or 1, self.text, self.title)
            if fmt is DocumentFormat.JSON_LIST:
                return json.dumps(self.text, ensure_ascii=False)
            return self.text
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
    message_indices: tuple[int, ...] = ()
    """For documents that are whole messages (`MESSAGES`): the consecutive messages they occupy."""
    calling_message: int | None = None
    """For tool results: the assistant message that called the tools."""

    @property
    def takes_text(self) -> bool:
        """Whether text may be added around the documents (a JSON list or a run of messages takes none)."""
        return self.format not in (DocumentFormat.JSON_LIST, DocumentFormat.MESSAGES)

    @property
    def context_start(self) -> int:
        """The first message that belongs to the documents: where an intermediate call's prompt goes. For tool
        results, the assistant message that called the tools: a call without its results is refused."""
        return self.message_index if self.calling_message is None else self.calling_message


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
    detection: str = "none: not-requested"
    """What detection found, as the `X-Context-Format` response header says it: the format (`paragraphs;
    region=fence`), or `none: <reason>` (`no-context-region`, `single-document`, `no-question` ...)."""
    unmovable: ChatRequest | None = None
    """Where detection read a context whose boundaries are a guess (`none: ambiguous-chunks`: units that blank lines
    alone separate, read as paragraphs; `none: unproven-boundaries`: marked-up chunks told apart by a mark they may
    hold themselves): those units, for a step that only adds text beside them and never moves one (`focus`,
    `excerpt`). No step may move or drop them: a unit may be half of a chunk, or two."""
    written: tuple[Document, ...] = ()
    """The documents a step wrote into `body` as text (`repeat` doubles the rendered turn), in the order written: no
    later step may move them, but the response still says where they went."""

    @property
    def sent_documents(self) -> tuple[Document, ...]:
        """The documents the rendered body holds, in its order: those in place, else those a step wrote into it."""
        return self.documents or self.written

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
        if self.block.format is DocumentFormat.MESSAGES:
            body["messages"] = self._render_messages(messages)
            return body
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
        if self.block.format in (DocumentFormat.PARTS, DocumentFormat.MESSAGES):
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

    def _render_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages with the run of document messages replaced by the documents, in their order.

        A document keeps its own message (role, `tool_call_id`, other fields); one a strategy made up takes the
        role of the run. A tool result no document stands for any more keeps its message with empty content:
        the API refuses a tool call left without its result.
        """
        assert self.block is not None
        slots = self.block.message_indices
        role = messages[slots[0]].get("role", "system")
        rendered: list[dict[str, Any]] = []
        by_call: dict[Any, dict[str, Any]] = {}
        for document in self.documents:
            message = dict(document.message) if document.message is not None else {"role": role}
            if not document.raw or document.message is None:
                message["content"] = document.text
            call = message.get("tool_call_id")
            if role == "tool" and call in by_call:
                # Two facts from one result: one message, as a call has one result.
                by_call[call]["content"] = f"{by_call[call]['content']}\n{message['content']}"
                continue
            by_call[call] = message
            rendered.append(message)
        if role == "tool":
            dropped = [messages[i] for i in slots if messages[i].get("tool_call_id") not in by_call]
            rendered.extend({**m, "content": ""} for m in dropped)
        return messages[: slots[0]] + rendered + messages[slots[-1] + 1 :]


def counted(request: ChatRequest, target: ChatRequest) -> str:
    """What a step's `quoted=` or `focused=` counts in `target`: the request's documents (""), or the units of a
    reading it may not move (`unmovable`), named: `_paragraph` where blank lines alone separate the context
    (`none: ambiguous-chunks`), `_chunk` where a mark told marked-up chunks apart (`none: unproven-boundaries`).
    A client reading `quoted=3` looks for its third document; `quoted_paragraph=3` is the third paragraph."""
    if target is request:
        return ""
    return "_paragraph" if request.detection.startswith("none: ambiguous-chunks") else "_chunk"


def text_of(message: Mapping[str, Any]) -> str:
    """The text of a message: its string content, or its text parts joined by line breaks."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the chat's last user turn, stripped; "" without one."""
    last = next((m for m in reversed(messages) if isinstance(m, Mapping) and m.get("role") == "user"), None)
    return text_of(last).strip() if last is not None else ""


def is_instruction(text: str) -> bool:
    """Whether `text` tells the model how to answer and asks nothing: a `<system-reminder>` (or `<instructions>`)
    turn, or a few lines that are all imperatives naming the question in the third person, none with a question
    mark. ("Use the documents to answer who founded Acme" asks: it names no question.)"""
    if len(text) > _MAX_INSTRUCTION_CHARS:
        return False  # read no further: a long text asks or carries something
    if _REMINDER.match(text):
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and len(lines) <= 8 and all(_instructs(line) for line in lines)


def _instructs(line: str) -> bool:
    """Whether one line is an imperative about the question that asks nothing ("Please respond in the same language
    as the user's question."). Each pattern reads the line once from its start or searches it once."""
    return "?" not in line and bool(_IMPERATIVE.match(line)) and _ABOUT_THE_QUESTION.search(line) is not None


def asking_turn(messages: Sequence[Mapping[str, Any]], last_user: int) -> int:
    """The user turn that asks: `last_user`, or the latest user turn before it when the turns after that one are an
    app's reminders (`<system-reminder>...</system-reminder>`: Onyx's, after the question); -1 without a user turn.
    A turn in the imperative ("Write a reply to this request ...") asks."""
    index = last_user
    for _ in range(_MAX_TURNS_BACK):
        if index < 0 or not _APP_REMINDER.match(text_of(messages[index])[:_MAX_INSTRUCTION_CHARS]):
            return index
        earlier = next((i for i in range(index - 1, -1, -1) if messages[i].get("role") == "user"), -1)
        if earlier < 0:
            return index
        index = earlier
    return index


def _separator(separators: tuple[str, ...], index: int) -> str:
    if not separators:
        return "\n"
    return separators[index] if index < len(separators) else separators[-1]


@dataclass(frozen=True, slots=True)
class DocumentOrder:
    """Where the client's documents went: their numbers (1 for the client's first) in the order sent, and the
    numbers of those dropped."""

    sent: tuple[int, ...]
    dropped: tuple[int, ...]
    permuted: bool = False
    """Whether the calls sent `sent` each in an order of its own (`medoid`), not in the order listed."""

    @property
    def kept(self) -> bool:
        """Whether nothing moved and nothing was dropped."""
        return not self.permuted and not self.dropped and self.sent == tuple(range(1, len(self.sent) + 1))


def document_order(found: Sequence[Document], sent: Sequence[Document]) -> DocumentOrder | None:
    """Where the documents `found` in the client's request went in the documents `sent`; None where a sent
    document is none of them (a strategy rewrote it: evidence, facts), so no order can be told."""
    number_of = {id(document): number for number, document in enumerate(found, start=1)}
    numbers = [number_of.get(id(document)) for document in sent]
    if any(n is None for n in numbers):
        return None
    placed = tuple(n for n in numbers if n is not None)
    kept = set(placed)
    return DocumentOrder(placed, tuple(n for n in range(1, len(found) + 1) if n not in kept))
