"""Cherry Studio (desktop, before its AI SDK rewrite): an assistant with a knowledge base. The references found are
one JSON list (`JSON.stringify(references, null, 2)`: `id` counting from 1, `content`, `sourceUrl` a Markdown link to
the stored file, `type`), in a ```json fence; `REFERENCE_PROMPT` puts the question under `## My question is:` and the
fence under `## Reference Materials:`, then asks for the user's language. That text replaces the content of the last
user message; earlier turns go as they were typed, and an assistant with no prompt sends no system message. (Since
the AI SDK rewrite the search is the `builtin_knowledge_search` tool, and this prompt, with a fixed question, its
result.)

Sources (CherryHQ/cherry-studio@6d314458d6280c1daa179462f2ca35513f076b4d): `getMessageContent` and
`getKnowledgeBaseReferencesFromCache` (src/renderer/src/aiCore/clients/BaseApiClient.ts), `convertMessageToSdkParam`
and `getRequestTransformer` (src/renderer/src/aiCore/clients/openai/OpenAIApiClient.ts), `processKnowledgeSearch`,
`getKnowledgeSourceUrl` and `getFileFromUrl` (src/renderer/src/services/KnowledgeService.ts), `fetchExternalTool`
(src/renderer/src/services/ApiService.ts). `REFERENCE_PROMPT` verbatim in templates/cherry_studio_reference_prompt.txt
from src/renderer/src/config/prompts.ts @a725439616f430c46b28448942f78fb01547d866 (the file is not in the mirror at
6d314458; this version carries every prompt ApiService imports there, and later versions keep the same text, e.g.
packages/shared/config/prompts.ts @1193e6fb8c3482c900aa07749ea5cf81ddcfdf9f).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "Cherry Studio"
SOURCE = (
    "CherryHQ/cherry-studio@6d314458d6280c1daa179462f2ca35513f076b4d: src/renderer/src/aiCore/clients/BaseApiClient.ts "
    "getMessageContent; src/renderer/src/aiCore/clients/openai/OpenAIApiClient.ts getRequestTransformer; "
    "src/renderer/src/services/KnowledgeService.ts processKnowledgeSearch, getKnowledgeSourceUrl; "
    "src/renderer/src/services/ApiService.ts fetchExternalTool; "
    "@a725439616f430c46b28448942f78fb01547d866: src/renderer/src/config/prompts.ts REFERENCE_PROMPT"
)


def js_replace(text: str, pattern: str, replacement: str) -> str:
    """`String.prototype.replace` with a string pattern: the first match only, and `$$`, `$&`, `` $` `` and `$'` in
    the replacement expand as JavaScript expands them."""
    at = text.find(pattern)
    if at < 0:
        return text
    expansions = {"$": "$", "&": pattern, "`": text[:at], "'": text[at + len(pattern) :]}
    out, i = [], 0
    while i < len(replacement):
        if replacement[i] == "$" and i + 1 < len(replacement) and replacement[i + 1] in expansions:
            out.append(expansions[replacement[i + 1]])
            i += 2
        else:
            out.append(replacement[i])
            i += 1
    return text[:at] + "".join(out) + text[at + len(pattern) :]


def references(chunks: Sequence[Chunk]) -> list[dict[str, Any]]:
    """`processKnowledgeSearch`: one base, hits best first, ids from 1. The stored file's id is a v4 UUID (derived
    from its name here) and `getKnowledgeSourceUrl` links it as `[origin_name](http://file/<id><ext>)`."""
    found = []
    for index, chunk in enumerate(chunks):
        file_id = uuid.UUID(bytes=uuid.uuid5(uuid.NAMESPACE_URL, f"cherry-studio/{chunk.file}").bytes, version=4)
        stored = f"{file_id}{PurePosixPath(chunk.file).suffix}"
        found.append(
            {
                "id": index + 1,
                "content": chunk.text,
                "sourceUrl": f"[{chunk.file}](http://file/{stored})",
                "type": "file",
            }
        )
    return found


def _shape(name: str, chunks: Sequence[Chunk], question: str, history: Sequence[dict[str, str]]) -> AppShape:
    """`getMessageContent` fills `REFERENCE_PROMPT` for the message the references were cached for (the last user
    message); `getRequestTransformer` sends no system message when the assistant's prompt is empty."""
    found = references(chunks)
    listed = json.dumps(found, indent=2, ensure_ascii=False)  # JSON.stringify(allReferences, null, 2)
    units = tuple(json.dumps(ref, indent=2, ensure_ascii=False).replace("\n", "\n  ") for ref in found)
    fence = f"```json\n{listed}\n```"
    content = js_replace(
        js_replace(template("cherry_studio_reference_prompt.txt"), "{question}", question), "{references}", fence
    )
    messages = [*history, {"role": "user", "content": content}]
    body = {"model": MODEL, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    return AppShape(name, APP, SOURCE, body, units, question)


def cherry_studio() -> AppShape:
    chunks = [*picked("minilm", 3, 4), *picked("dotprompt", 3), *picked("minilm", 2), *picked("maskedarray", 8)]
    question = "How do I load all-MiniLM-L6-v2 with plain HuggingFace Transformers and pool the token embeddings?"
    return _shape("cherry-studio", chunks, question, [])


def cherry_studio_follow_up() -> AppShape:
    chunks = picked("graphqa", 6, 5, 8, 26, 15)
    history = [
        {"role": "user", "content": "Which prompts in graph_qa_prompts.py turn a question into a query?"},
        {
            "role": "assistant",
            "content": "The generation templates do: CYPHER_GENERATION_TEMPLATE for Cypher, NGQL_GENERATION_TEMPLATE "
            "for NebulaGraph, SPARQL_GENERATION_SELECT_TEMPLATE for SPARQL and AQL_GENERATION_TEMPLATE for ArangoDB.",
        },
    ]
    question = "And which ones turn the query results back into an answer for the user?"
    return _shape("cherry-studio-follow-up", chunks, question, history)


SHAPES = (cherry_studio, cherry_studio_follow_up)
