"""LibreChat: files embedded by its RAG API reach the model in two ways. A chat on a model endpoint (run as an
"ephemeral agent") with files uploaded for file search gets `createContextHandlers`' prompt as its system message:
each file's chunks retrieved for the latest user message, each chunk a `<contextItem>` holding a CDATA section,
grouped in `<file>` elements inside `<context>`, indented as the template literals indent them, and a footer of
guidelines; the turns follow, the question last. An agent with the `file_search` tool gets the chunks as the tool's
result, after the question: `File:`, `Relevance:` and `Content:` lines per chunk, joined by `---` lines; the system
message holds the tool's note on the files, then the agent's instructions.

Sources (danny-avila/LibreChat@8ca4cf3d2f4cd911403bc6f7e1577cc9cfb44f34): the prompt of `createContextHandlers`
(api/app/clients/prompts/createContextHandlers.js), its footer and template literals verbatim; `primeFiles` and
`createFileSearchTool` (api/app/clients/tools/util/fileSearch.js), the tool's description and result lines verbatim;
`AgentClient.buildMessages` and `chatCompletion` (api/server/controllers/agents/client.js: the augmented prompt put
before the instructions, the tools' context before them, the whole trimmed) and `createRun`
(packages/api/src/agents/run.ts). The messages as the agents library sends them: `formatAgentMessages` and
`StandardGraph` (npm `@librechat/agents` 2.4.46, src/messages/format.ts, src/graphs/Graph.ts: user and assistant
text as content parts, the system message first) and `_convertMessagesToOpenAIParams` and `invocationParams` of npm
`@langchain/openai` 0.5.16 (dist/chat_models.js).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "LibreChat"
SOURCE = (
    "danny-avila/LibreChat@8ca4cf3d2f4cd911403bc6f7e1577cc9cfb44f34: api/app/clients/prompts/createContextHandlers.js "
    "createContextHandlers; api/app/clients/tools/util/fileSearch.js primeFiles, createFileSearchTool; "
    "api/server/controllers/agents/client.js AgentClient.buildMessages, chatCompletion; "
    "packages/api/src/agents/run.ts createRun"
)
FOOTER = """Use the context as your learned knowledge to better answer the user.

In your response, remember to follow these guidelines:
- If you don't know the answer, simply say that you don't know.
- If you are unsure how to answer, ask for clarification.
- Avoid mentioning that you obtained the information from the context.
"""
SEMANTIC_SEARCH = (
    "A semantic search was executed with the user's message as the query, retrieving the following context inside "
    "<context></context> XML tags."
)
FILE_SEARCH = "file_search"
"""`Tools.file_search`."""
FILE_SEARCH_DESCRIPTION = f'Performs semantic search across attached "{FILE_SEARCH}" documents using natural language queries. This tool analyzes the content of uploaded files to find relevant information, quotes, and passages that best match your query. Use this to extract specific information or find relevant sections within the available documents.'  # noqa: E501 - verbatim
QUERY_DESCRIPTION = "A natural language query to search for relevant information in the files. Be specific and use keywords related to the information you're looking for. The query will be used for semantic similarity matching against the file contents."  # noqa: E501 - verbatim
USER_ID = "6650c4a1e2f3b4c5d6e7f809"
"""The signed-in user's id (a MongoDB ObjectId), which the OpenAI config sends as `user`."""


@dataclass(frozen=True)
class UploadedFile:
    """A file the RAG API embedded, as LibreChat stores it."""

    filename: str
    type: str
    """Its MIME type."""

    @property
    def file_id(self) -> str:
        # LibreChat's file ids are UUIDs; derived from the name so the fixture is the same on every run.
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"librechat/{self.filename}"))


def context_item(chunk: Chunk) -> str:
    """One retrieved chunk as `createContextHandlers` writes it (the text trimmed, inside CDATA)."""
    return f"\n            <contextItem>\n              <![CDATA[{chunk.text.strip()}]]>\n            </contextItem>"


def create_context(results: Sequence[tuple[UploadedFile, Sequence[Chunk]]]) -> str:
    """`createContext()` without `RAG_USE_FULL_CONTEXT`: the RAG API's chunks for each processed file."""
    one_file = len(results) == 1
    header = (
        f"The user has attached {'a' if one_file else len(results)} file{'' if one_file else 's'} to the conversation:"
    )
    listed = "".join(
        f"\n              <file>\n                <filename>{file.filename}</filename>\n"
        f"                <type>{file.type}</type>\n              </file>"
        for file, _ in results
    )
    files = listed if one_file else f"\n      <files>{listed}\n        </files>"
    context = "".join(
        f"\n          <file>\n            <filename>{file.filename}</filename>\n"
        f"            <context>{''.join(context_item(chunk) for chunk in chunks)}\n"
        "            </context>\n          </file>"
        for file, chunks in results
    )
    return (
        f"{header}\n        {files}\n\n        {SEMANTIC_SEARCH}\n\n        <context>{context}\n        </context>\n\n"
        f"        {FOOTER}"
    )


def system_content(*parts: str) -> str:
    """`chatCompletion`'s system message: the tools' context and the instructions joined by a line break, trimmed
    (JavaScript's `trim` and Python's `strip` remove the same whitespace here)."""
    return "\n".join(parts).strip()


def text_parts(text: str) -> list[dict[str, str]]:
    """`formatAgentMessages` turns a message's text into one text part, which `@langchain/openai` sends as is."""
    return [{"type": "text", "text": text}]


def request_body(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What `@langchain/openai`'s `ChatOpenAI` sends for an agent run on the OpenAI endpoint, in its key order."""
    body: dict[str, Any] = {"model": MODEL, "user": USER_ID, "stream": True}
    if tools:
        body["tools"] = tools
    body["stream_options"] = {"include_usage": True}
    body["messages"] = messages
    return body


def librechat() -> AppShape:
    """A second question in a chat with an OpenAI model, two Markdown files uploaded for file search with the first:
    `createContextHandlers` queries each file (`k: 4`) with the new question and the prompt is the system message
    (no custom instructions, so nothing follows the footer, which `trim` cuts)."""
    card = UploadedFile("all-MiniLM-L6-v2.md", "text/markdown")
    readme = UploadedFile("dotprompt-README.md", "text/markdown")
    results = [(card, picked("minilm", 3, 4, 5, 2)), (readme, picked("dotprompt", 3, 1, 4, 8))]
    history = [
        ("user", "I attached the model card and the dotprompt README. What does all-MiniLM-L6-v2 map sentences to?"),
        (
            "assistant",
            "It maps sentences and paragraphs to a 384-dimensional dense vector space, which you can use for "
            "clustering or semantic search.",
        ),
    ]
    question = "How do I get the sentence embeddings without installing sentence-transformers?"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_content("", create_context(results), "")}]
    messages += [{"role": role, "content": text_parts(text)} for role, text in history]
    messages.append({"role": "user", "content": text_parts(question)})
    units = tuple(context_item(chunk).strip() for _, chunks in results for chunk in chunks)
    return AppShape("librechat", APP, SOURCE, request_body(messages), units, question)


def js_number(value: float) -> str:
    """How JavaScript writes a number in a template literal, for the values here (Python's `repr` gives the same
    shortest round-trip digits; an integral value has no `.0`)."""
    return str(int(value)) if value.is_integer() else repr(value)


def file_search_result(found: Sequence[tuple[Chunk, float]]) -> tuple[str, tuple[str, ...]]:
    """`createFileSearchTool`'s result: the closest ten, each with `1.0 - distance.toFixed(4)` as its relevance (a
    number minus a string, so JavaScript writes the float it gets), joined by `---` lines."""
    ranked = sorted(found, key=lambda pair: pair[1])[:10]
    units = tuple(
        f"File: {chunk.file}\nRelevance: {js_number(1.0 - float(f'{distance:.4f}'))}\nContent: {chunk.text}\n"
        for chunk, distance in ranked
    )
    return "\n---\n".join(units), units


def file_search_tool() -> dict[str, Any]:
    """The `file_search` tool as `@langchain/openai` sends it: the zod schema as `zod-to-json-schema` writes it."""
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": QUERY_DESCRIPTION}},
        "required": ["query"],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    }
    return {
        "type": "function",
        "function": {"name": FILE_SEARCH, "description": FILE_SEARCH_DESCRIPTION, "parameters": parameters},
    }


def librechat_file_search() -> AppShape:
    """An agent with the `file_search` tool and one file of its own: the request after the tool ran, the question
    before the tool call and its result (five chunks, `k: 5`, ranked by distance)."""
    instructions = "You help our team reuse LangChain's graph QA prompts. Quote the prompt text you rely on."
    prompts = UploadedFile("graph_qa_prompts.py", "text/x-python")
    tool_context = f"- Note: Use the {FILE_SEARCH} tool to find relevant information within:\n\t- {prompts.filename}"
    graphqa = picked("graphqa", 6, 31, 5, 14, 15)
    distances = [0.21134376525878906, 0.2245614528656006, 0.4129641056060791, 0.43812090158462524, 0.4507]
    content, units = file_search_result(list(zip(graphqa, distances, strict=True)))
    question = "Which prompt shows a worked example about Neo4j stocks, and what does its helpful answer say?"
    query = "worked example managers own Neo4j stocks helpful answer"
    call_id = "call_" + uuid.uuid5(uuid.NAMESPACE_URL, f"librechat/{query}").hex[:24]
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": FILE_SEARCH, "arguments": json.dumps({"query": query}, separators=(",", ":"))},
    }
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_content(tool_context, instructions, "")},
        {"role": "user", "content": text_parts(question)},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": content, "name": FILE_SEARCH, "tool_call_id": call_id},
    ]
    body = request_body(messages, [file_search_tool()])
    return AppShape("librechat-file-search", APP, SOURCE, body, units, question)


SHAPES = (librechat, librechat_file_search)
