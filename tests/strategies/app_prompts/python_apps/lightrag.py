"""LightRAG: its query step in naive and mix mode. Each document chunk is one JSON line,
`{"reference_id": "n", "content": "..."}` (`json.dumps`, non-ASCII kept, the chunk's line breaks escaped), the lines
joined by line breaks inside a ```` ```json ```` fence under `Document Chunks (...)`; a second fence follows with the
reference list, `[n] file`, where `n` numbers the files by how many chunks each has (so chunks of one file share
their id, and the ids need not rise in prompt order). In mix mode two more fences of JSON lines come first, the
knowledge graph's entities and relationships. That context closes the system prompt (`---Context---`); the
conversation history the caller passed follows as user and assistant turns, and the question, as typed, is the last
user message.

Sources (HKUDS/LightRAG@207af40f54943ccee47256d25156215e01d4456c): `PROMPTS["naive_rag_response"]` and
`PROMPTS["rag_response"]` of lightrag/prompt.py, verbatim in templates/lightrag_naive_rag_response.txt and
templates/lightrag_rag_response.txt, and its `PROMPTS["naive_query_context"]` and `PROMPTS["kg_query_context"]`; the
context mirrors `naive_query`, `kg_query`, `_apply_token_truncation` and `_build_context_str` (lightrag/operate.py).
Two helpers are not stored at that commit and come from the release between it and the next (PyPI `lightrag-hku`
1.4.9.8, whose prompt.py and `naive_query` match the commit's): `generate_reference_list_from_chunks`
(lightrag/utils.py) and `openai_complete_if_cache` (lightrag/llm/openai.py: system prompt, history, then the query).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "LightRAG"
SOURCE = (
    'HKUDS/LightRAG@207af40f54943ccee47256d25156215e01d4456c: lightrag/prompt.py PROMPTS["naive_rag_response"], '
    'PROMPTS["rag_response"], PROMPTS["naive_query_context"], PROMPTS["kg_query_context"]; lightrag/operate.py '
    "naive_query, kg_query, _apply_token_truncation, _build_context_str; lightrag-hku 1.4.9.8 (PyPI wheel): "
    "lightrag/utils.py generate_reference_list_from_chunks; lightrag/llm/openai.py openai_complete_if_cache"
)
NAIVE_QUERY_CONTEXT = (
    "\n"
    "Document Chunks (Each entry has a reference_id refer to the `Reference Document List`):\n"
    "\n"
    "```json\n"
    "{text_chunks_str}\n"
    "```\n"
    "\n"
    "Reference Document List (Each entry starts with a [reference_id] that corresponds to entries in the Document "
    "Chunks):\n"
    "\n"
    "```\n"
    "{reference_list_str}\n"
    "```\n"
    "\n"
)
KG_QUERY_CONTEXT = (
    "\n"
    "Knowledge Graph Data (Entity):\n"
    "\n"
    "```json\n"
    "{entities_str}\n"
    "```\n"
    "\n"
    "Knowledge Graph Data (Relationship):\n"
    "\n"
    "```json\n"
    "{relations_str}\n"
    "```\n" + NAIVE_QUERY_CONTEXT
)
RESPONSE_TYPE = "Multiple Paragraphs"
"""`QueryParam.response_type`'s default."""
USER_PROMPT = "n/a"
"""What `naive_query` and `kg_query` write for `{user_prompt}` when the caller gave none."""


def reference_list(chunks: Sequence[Chunk]) -> dict[str, str]:
    """`generate_reference_list_from_chunks`: each file's reference id, the files ranked by their number of chunks,
    then by first appearance."""
    counts: dict[str, int] = {}
    for chunk in chunks:
        counts[chunk.file] = counts.get(chunk.file, 0) + 1
    # `counts` keeps the files in order of first appearance, and the sort is stable.
    ranked = sorted(counts, key=lambda file: -counts[file])
    return {file: str(i + 1) for i, file in enumerate(ranked)}


def chunk_context(chunks: Sequence[Chunk]) -> tuple[list[str], str]:
    """The chunks as `naive_query` and `_build_context_str` write them (one JSON line each), and the reference
    list's lines. LightRAG's chunker strips each chunk's text."""
    ids = reference_list(chunks)
    lines = [
        json.dumps({"reference_id": ids[chunk.file], "content": chunk.text.strip()}, ensure_ascii=False)
        for chunk in chunks
    ]
    references = "\n".join(f"[{ref_id}] {file}" for file, ref_id in ids.items())
    return lines, references


def _body(system: str, history: Sequence[dict[str, str]], question: str, *, stream: bool) -> dict[str, Any]:
    """`openai_complete_if_cache`: the system prompt, the conversation history, then the query; `stream` is always
    passed (`/query` sends False, `/query/stream` True)."""
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    return {"model": MODEL, "messages": messages, "stream": stream}


def lightrag_naive() -> AppShape:
    """`mode="naive"` through `/query`: vector search over the chunks only, no history."""
    chunks = [*picked("minilm", 2, 3), *picked("dotprompt", 4), *picked("minilm", 4, 8), *picked("dotprompt", 7)]
    question = "How do I compute all-MiniLM-L6-v2 sentence embeddings with plain transformers and mean pooling?"
    lines, references = chunk_context(chunks)
    context = NAIVE_QUERY_CONTEXT.format(text_chunks_str="\n".join(lines), reference_list_str=references)
    system = template("lightrag_naive_rag_response.txt").format(
        response_type=RESPONSE_TYPE, user_prompt=USER_PROMPT, content_data=context
    )
    body = _body(system, (), question, stream=False)
    return AppShape("lightrag-naive", APP, SOURCE, body, tuple(lines), question)


def lightrag_mix_follow_up() -> AppShape:
    """`mode="mix"` (the API's default) through `/query/stream`, with one earlier exchange in `conversation_history`:
    the graph's entities and relationships (file path and date removed, as `_apply_token_truncation` leaves them)
    before the chunks, which come in the order `_merge_all_chunks` interleaves vector, entity and relation chunks."""
    entities = [
        {
            "entity": "CYPHER_QA_TEMPLATE",
            "type": "content",
            "description": "CYPHER_QA_TEMPLATE is a prompt that turns the results of a Cypher query into a "
            "human-readable answer, with a worked example about Neo4j stocks.",
        },
        {
            "entity": "Neo4j",
            "type": "organization",
            "description": "Neo4j is the graph database company whose stock owners the prompt's worked example asks "
            "about.",
        },
        {
            "entity": "CTL LLC",
            "type": "organization",
            "description": "CTL LLC is a manager named in the worked example as an owner of Neo4j stocks.",
        },
    ]
    relations = [
        {
            "entity1": "CTL LLC",
            "entity2": "Neo4j",
            "description": "In the worked example, CTL LLC is a manager that owns Neo4j stocks.",
        },
        {
            "entity1": "CYPHER_QA_TEMPLATE",
            "entity2": "Neo4j",
            "description": "The Cypher QA prompt's example question asks which managers own Neo4j stocks.",
        },
    ]
    history = [
        {"role": "user", "content": "Which prompt turns a question into a Cypher statement?"},
        {
            "role": "assistant",
            "content": "CYPHER_GENERATION_TEMPLATE does: it asks for a Cypher statement that uses only the "
            "relationship types and properties in the schema.\n\n### References\n\n- [1] graph_qa_prompts.py",
        },
    ]
    chunks = [*picked("graphqa", 6, 2), *picked("dotprompt", 7), *picked("graphqa", 31, 18)]
    question = "What does the QA prompt tell the model to say when the information is empty?"
    lines, references = chunk_context(chunks)
    context = KG_QUERY_CONTEXT.format(
        entities_str="\n".join(json.dumps(entity, ensure_ascii=False) for entity in entities),
        relations_str="\n".join(json.dumps(relation, ensure_ascii=False) for relation in relations),
        text_chunks_str="\n".join(lines),
        reference_list_str=references,
    )
    system = template("lightrag_rag_response.txt").format(
        response_type=RESPONSE_TYPE, user_prompt=USER_PROMPT, context_data=context
    )
    body = _body(system, history, question, stream=True)
    return AppShape("lightrag-mix-follow-up", APP, SOURCE, body, tuple(lines), question)


SHAPES = (lightrag_naive, lightrag_mix_follow_up)
