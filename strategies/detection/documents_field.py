"""Documents a client passes in the `documents` body field, the way vLLM's RAG chat templates and Cohere take
them: strings, or objects with a text field (`text`, `snippet`, `content`, `page_content` ...) and an optional
title. With a strategy that changes them, they are rendered into the last user message in the Lost in the
Middle format and the field is dropped; a field of any other shape is left exactly as it came, for the upstream
to judge."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from contextlift.strategies.detection.limits import DocumentLimits
from contextlift.strategies.detection.question import find_question
from contextlift.strategies.request import ChatRequest, Document, DocumentBlock, last_user_text, text_of
from contextlift.strategies.spans import DocumentFormat, render_litm_line

DOCUMENTS_FIELD = "documents"
"""Body field in which a client may pass documents."""
_TEXT_FIELDS = ("text", "snippet", "content", "page_content", "body", "chunk")
_TITLE_FIELDS = ("title", "name")


def from_documents_field(body: Mapping[str, Any], limits: DocumentLimits | None) -> ChatRequest:
    """The request with the field's documents in the last user message; untouched when the field is not a list
    of documents this module can read."""
    value = body[DOCUMENTS_FIELD]
    messages = body["messages"]
    if not isinstance(value, list) or not value:
        return ChatRequest(body=body, question=last_user_text(messages), detection="none: unrecognised-documents-field")
    if limits is not None:
        limits.check_count(len(value))  # before a single object is built for them
        limits.check_bytes(_field_texts(value))
    read = [_read_item(item) for item in value]
    if any(r is None for r in read):
        return ChatRequest(body=body, question=last_user_text(messages), detection="none: unrecognised-documents-field")
    documents = []
    for position, item in enumerate(read, start=1):
        assert item is not None
        text, title = item
        raw = render_litm_line(position, text, title)
        prefix = len("Document [")
        documents.append(Document(text=text, title=title, raw=raw, number_span=(prefix, prefix + len(str(position)))))
    rest = {k: v for k, v in body.items() if k != DOCUMENTS_FIELD}
    edited = [dict(m) for m in messages]
    users = [i for i, m in enumerate(edited) if m.get("role") == "user"]
    if users:
        index = users[-1]
        question_text = text_of(edited[index])
    else:
        edited.append({"role": "user", "content": ""})
        index, question_text = len(edited) - 1, ""
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
    edited[index] = {**edited[index], "content": question_text}
    rest["messages"] = edited
    return ChatRequest(
        body=rest,
        documents=tuple(documents),
        block=block,
        question=find_question("", block.tail, ""),
        detection="documents-field",
    )


def _read_item(item: Any) -> tuple[str, str | None] | None:
    if isinstance(item, str):
        return item, None
    if not isinstance(item, Mapping):
        return None
    text = next((item[k] for k in _TEXT_FIELDS if isinstance(item.get(k), str)), None)
    if text is None:
        return None
    title = next((item[k] for k in _TITLE_FIELDS if isinstance(item.get(k), str)), None)
    return text, title


def _field_texts(items: list[Any]) -> Iterator[str]:
    """The strings of the `documents` field's items, counted against the byte limit."""
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            yield from (v for v in item.values() if isinstance(v, str))
