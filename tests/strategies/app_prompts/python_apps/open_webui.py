"""Open WebUI: retrieved chunks as `<source>` elements inside its RAG template, put in the last user message (the
default) or appended to the system message (`RAG_SYSTEM_CONTEXT=True`); and the 0.5 layout, `<source_id>` and
`<source_context>` in a system message, the question inside the template as well.

Templates: `DEFAULT_RAG_TEMPLATE` of backend/open_webui/config.py, copied verbatim into
templates/open_webui_0.12.4_rag_template.txt and templates/open_webui_0.5.20_rag_template.txt from the published
`open-webui` wheels 0.12.4 and 0.5.20 (`open_webui/config.py`). The joins mirror, in 0.12.4, `get_source_context` and
`apply_source_context_to_messages` (open_webui/utils/middleware.py), `rag_template` (open_webui/utils/task.py),
`add_or_update_user_message`, `add_or_update_system_message` and `update_message_content` (open_webui/utils/misc.py);
in 0.5.20, the context loop of `process_chat_payload` (open_webui/utils/middleware.py), its `rag_template` and
`add_or_update_system_message`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "Open WebUI"
SOURCE_0_12 = (
    "open-webui 0.12.4 (PyPI wheel): open_webui/config.py DEFAULT_RAG_TEMPLATE; open_webui/utils/middleware.py "
    "get_source_context, apply_source_context_to_messages; open_webui/utils/task.py rag_template; "
    "open_webui/utils/misc.py add_or_update_user_message, add_or_update_system_message"
)
SOURCE_0_5 = (
    "open-webui 0.5.20 (PyPI wheel): open_webui/config.py DEFAULT_RAG_TEMPLATE; open_webui/utils/middleware.py "
    "process_chat_payload (context loop); open_webui/utils/task.py rag_template; open_webui/utils/misc.py "
    "add_or_update_system_message"
)
USER_SYSTEM_PROMPT = "You are a careful assistant for our engineering team. Answer in short paragraphs."
"""A system prompt set in the chat's settings: the front end sends it as the first message."""


def _file_id(name: str) -> str:
    # Open WebUI's file ids are UUIDs; derived from the name so the fixture is the same on every run.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"open-webui/{name}"))


def retrieval_sources(chunks: Sequence[Chunk]) -> list[dict[str, Any]]:
    """The sources `get_sources_from_items` returns for attached files: one per file, its chunks in order."""
    sources: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        file_id = _file_id(chunk.file)
        source = sources.setdefault(
            chunk.file,
            {"source": {"type": "file", "id": file_id, "name": chunk.file}, "document": [], "metadata": []},
        )
        source["document"].append(chunk.text)
        source["metadata"].append({"file_id": file_id, "name": chunk.file, "source": chunk.file})
    return list(sources.values())


def source_elements(sources: Sequence[dict[str, Any]]) -> list[str]:
    """Each chunk as `get_source_context` (0.12.4) writes it: one `<source>` per chunk, the file's number as `id`
    (shared by the chunks of one file), no chunk metadata attributes (`RAG_SOURCE_METADATA_KEYS` is empty)."""
    source_ids: dict[str, int] = {}
    elements = []
    for source in sources:
        for doc, meta in zip(source.get("document", []), source.get("metadata", []), strict=False):
            source_id = meta.get("source") or source.get("source", {}).get("id") or "N/A"
            if source_id not in source_ids:
                source_ids[source_id] = len(source_ids) + 1
            name = source.get("source", {}).get("name")
            kind = source.get("source", {}).get("type")
            resource_id = source.get("source", {}).get("id") if kind != "text" else None
            elements.append(
                f'<source id="{source_ids[source_id]}"'
                + (f' name="{name}"' if name else "")
                + (f' resource-type="{kind}"' if kind else "")
                + (f' resource-id="{resource_id}"' if resource_id else "")
                + f">{doc}</source>"
            )
    return elements


def rag_template(text: str, context: str, query: str) -> str:
    """`rag_template` of 0.12.4 (its `prompt_template` changes nothing in the default template: it names no user
    variable). A `[query]` or `{{QUERY}}` written inside the context is kept, not replaced by the query."""
    kept = []
    if "[query]" in context:
        placeholder = "{{QUERY" + str(uuid.uuid4()) + "}}"
        text = text.replace("[query]", placeholder)
        kept.append((placeholder, "[query]"))
    if "{{QUERY}}" in context:
        placeholder = "{{QUERY" + str(uuid.uuid4()) + "}}"
        text = text.replace("{{QUERY}}", placeholder)
        kept.append((placeholder, "{{QUERY}}"))
    text = text.replace("[context]", context).replace("{{CONTEXT}}", context)
    text = text.replace("[query]", query).replace("{{QUERY}}", query)
    for placeholder, original in kept:
        text = text.replace(placeholder, original)
    return text


def _update_message_content(message: dict[str, Any], content: str, *, append: bool) -> dict[str, Any]:
    message["content"] = f"{message['content']}\n{content}" if append else f"{content}\n{message['content']}"
    return message


def apply_source_context(
    messages: list[dict[str, Any]], chunks: Sequence[Chunk], question: str, *, system_context: bool
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """`apply_source_context_to_messages` (0.12.4): the filled template is put before the last user message's text,
    or after the first system message's text with `RAG_SYSTEM_CONTEXT`."""
    elements = source_elements(retrieval_sources(chunks))
    context = "".join(f"{element}\n" for element in elements).strip()
    filled = rag_template(template("open_webui_0.12.4_rag_template.txt"), context, question)
    if system_context:
        if messages and messages[0].get("role") == "system":
            messages[0] = _update_message_content(messages[0], filled, append=True)
        else:
            messages.insert(0, {"role": "system", "content": filled})
    elif messages and messages[-1].get("role") == "user":
        messages[-1] = _update_message_content(messages[-1], filled, append=False)
    else:
        messages.append({"role": "user", "content": filled})
    return messages, tuple(elements)


def _shape(
    name: str, chunks: Sequence[Chunk], question: str, *, system_context: bool, history: Sequence[dict[str, Any]] = ()
) -> AppShape:
    messages = [*history, {"role": "user", "content": question}]
    if system_context:
        messages.insert(0, {"role": "system", "content": USER_SYSTEM_PROMPT})
    messages, units = apply_source_context(messages, chunks, question, system_context=system_context)
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape(name, APP, SOURCE_0_12, body, units, question)


def open_webui_user() -> AppShape:
    """The default: four files, one chunk each (ids 1 to 4), the template before the question in the user turn."""
    chunks = [
        *picked("minilm", 2),
        *picked("dotprompt", 4),
        *picked("maskedarray", 7),
        *pydoc_chunks("langchain", 0, 1),
    ]
    question = "How do I compute sentence embeddings with all-MiniLM-L6-v2 if I only have the transformers package?"
    return _shape("open-webui-user", chunks, question, system_context=False)


def open_webui_system() -> AppShape:
    """`RAG_SYSTEM_CONTEXT=True`: the template appended to the chat's own system prompt; the user turn is only the
    question. Two files: the chunks of each share their `id`."""
    chunks = [*picked("dotprompt", 1, 7, 8), *picked("maskedarray", 12, 0)]
    question = "What goes in the YAML front matter of a .prompt file, and can it set the temperature?"
    return _shape("open-webui-system", chunks, question, system_context=True)


def open_webui_one_file() -> AppShape:
    """One attached file: every chunk is `<source id="1" name="...">`, the first one its YAML front matter."""
    chunks = picked("minilm", 0, 2, 3, 6, 8)
    question = "Which datasets was all-MiniLM-L6-v2 trained on, and what is its license?"
    return _shape("open-webui-one-file", chunks, question, system_context=False)


def open_webui_follow_up() -> AppShape:
    """A second question in a chat: the earlier turns as the front end sent them, the template in the last turn."""
    history = [
        {"role": "user", "content": "Is numpy.ma a subclass of ndarray?"},
        {
            "role": "assistant",
            "content": "Yes. Since the rewrite, MaskedArray is a subclass of ndarray, so masked arrays of a subclass "
            "keep their class.",
        },
    ]
    chunks = picked("maskedarray", 0, 7, 9, 12)
    question = "Should masked arrays be filled before processing or not?"
    return _shape("open-webui-follow-up", chunks, question, system_context=False, history=history)


def open_webui_0_5() -> AppShape:
    """0.5.20 with an OpenAI-compatible model: `<source><source_id>n</source_id><source_context>...` (`n` the
    0-based index of the file, shared by its chunks) in the 0.5 template, which holds the question too, as a new
    system message; the user turn is the question."""
    chunks = [*picked("dotprompt", 4, 7), *picked("minilm", 2, 3), *picked("maskedarray", 7)]
    question = "How do I turn a dotprompt file into system and user messages?"
    elements = []
    for source_index, source in enumerate(retrieval_sources(chunks)):
        for doc in source["document"]:
            elements.append(
                f"<source><source_id>{source_index}</source_id><source_context>{doc}</source_context></source>"
            )
    context = "".join(f"{element}\n" for element in elements).strip()
    filled = template("open_webui_0.5.20_rag_template.txt")
    # 0.5.20's rag_template, for a context holding neither `[query]` nor `{{QUERY}}`: plain replacements.
    assert not any(placeholder in context for placeholder in ("[query]", "{{QUERY}}"))
    filled = filled.replace("[context]", context).replace("{{CONTEXT}}", context)
    filled = filled.replace("[query]", question).replace("{{QUERY}}", question)
    messages = [{"role": "system", "content": filled}, {"role": "user", "content": question}]
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape("open-webui-0.5", APP, SOURCE_0_5, body, tuple(elements), question)


SHAPES = (open_webui_user, open_webui_system, open_webui_one_file, open_webui_follow_up, open_webui_0_5)
