"""LobeChat (1.x, server database): an agent with a knowledge base. Each retrieved chunk is one
`<chunk fileId="..." fileName="..." similarity="...">text</chunk>` element, the elements joined by line breaks inside
`<retrieved_chunks>`, after the knowledge bases' scope and before the `<user_query>` block; the whole
`<knowledge_base_qa_info>` block is appended to the user's own message, after a blank line. An agent with no system
role and no tools sends no system message. On a follow-up turn the earlier turns go as they were typed, and the
question is rewritten by the system agent: the rewrite sits in `<rewrite_query>` after `<raw_query>`. (LobeChat 2.x
searches with its built-in knowledge-base tool instead: `<file>` elements holding `<chunk>`s in a tool message.)

Sources (lobehub/lobe-chat): at @3182d8942abbd43a1677aa836c61c5a12cdf964e, `internal_coreProcessMessage` and
`internal_fetchAIChatMessage` (src/store/chat/slices/aiChat/actions/generateAIChat.ts), `knowledgePrompts`
(packages/prompts/src/knowledgeBaseQA/knowledge.ts) and the snapshot of `knowledgeBaseQAPrompts`
(packages/prompts/src/knowledgeBaseQA/__snapshots__/index.test.ts.snap), which the joins below reproduce; the
templates verbatim from `chunkPrompts` (packages/prompts/src/knowledgeBaseQA/chunk.ts
@6d1fa163617cc184a5b128b313d9e33538b38b8d), `knowledgeBaseQAPrompts` (packages/prompts/src/knowledgeBaseQA/index.ts
@1736009cc1ed83fad6df967ec15f4d29f69b296a) and `userQueryPrompt` (src/prompts/knowledgeBaseQA/userQuery.ts
@d9d4e0407a83fe937a5f62525f8bfc5be380eeac, its text the snapshot's); `internal_retrieveChunks` and
`internal_rewriteQuery` (src/store/chat/slices/aiChat/actions/rag.ts @0da4c4ab357b94efbead2ca48194e6c89c49c774);
`processMessages` (src/services/chat.ts @009a4790df118a7f7225bab2cdef4700f092769f); the agent store's
`currentEnabledKnowledge` selector; `idGenerator` (file_ and kb_ ids, 12 characters of nanoid's alphabet).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "LobeChat"
SOURCE = (
    "lobehub/lobe-chat@3182d8942abbd43a1677aa836c61c5a12cdf964e: "
    "src/store/chat/slices/aiChat/actions/generateAIChat.ts internal_coreProcessMessage, internal_fetchAIChatMessage; "
    "packages/prompts/src/knowledgeBaseQA/knowledge.ts knowledgePrompts; "
    "packages/prompts/src/knowledgeBaseQA/__snapshots__/index.test.ts.snap; "
    "@6d1fa163617cc184a5b128b313d9e33538b38b8d: packages/prompts/src/knowledgeBaseQA/chunk.ts chunkPrompts; "
    "@1736009cc1ed83fad6df967ec15f4d29f69b296a: packages/prompts/src/knowledgeBaseQA/index.ts knowledgeBaseQAPrompts; "
    "@d9d4e0407a83fe937a5f62525f8bfc5be380eeac: src/prompts/knowledgeBaseQA/userQuery.ts userQueryPrompt; "
    "@0da4c4ab357b94efbead2ca48194e6c89c49c774: src/store/chat/slices/aiChat/actions/rag.ts internal_retrieveChunks"
)
QA_INFO_INTRO = "You are also a helpful assistant good answering questions related to {domains}. And you'll be provided with a question and several passages that might be relevant. And currently your task is to provide answer based on the question and passages."  # noqa: E501 - verbatim
ANSWER_INSTRUCTION = (
    "<knowledge_base_anwser_instruction>\n"
    "- Note that passages might not be relevant to the question, please only use the passages that are relevant.\n"
    "- if there is no relevant passage, please answer using your knowledge.\n"
    "- Answer should use the same original language as the question and follow markdown syntax.\n"
    "</knowledge_base_anwser_instruction>"
)
KNOWLEDGE_DOCSTRING = (
    "<knowledge_bases_docstring>here are the knowledge base scope we retrieve chunks from:</knowledge_bases_docstring>"
)
CHUNKS_DOCSTRING = "<retrieved_chunks_docstring>here are retrived chunks you can refer to:</retrieved_chunks_docstring>"
USER_QUERY_DOCSTRING = "<user_query_docstring>to make result better, we may rewrite user's question.If there is a rewrite query, it will be wrapper with `rewrite_query` tag.</user_query_docstring>"  # noqa: E501 - verbatim
NANOID_ALPHABET = "1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
SIMILARITIES = (0.6987340152263641, 0.6503914832548157, 0.6312851786613464, 0.5972140431404114, 0.5731002688407898)
"""`1 - cosineDistance`, as pgvector returns it, best first (`semanticSearchForChat` orders by similarity). Python's
`repr` and JavaScript's `String` write these doubles alike."""


@dataclass(frozen=True)
class KnowledgeItem:
    """`currentEnabledKnowledge`: the agent's enabled files (`type` "file", the file's MIME type) and knowledge bases
    (`type` "knowledgeBase"); neither carries a description."""

    id: str
    name: str
    type: str
    file_type: str | None = None


@dataclass(frozen=True)
class SearchChunk:
    """`ChatSemanticSearchChunk`; `page_number` only for paged documents (PDF)."""

    file_id: str
    file_name: str
    similarity: float
    text: str
    page_number: int | None = None


def lobe_id(prefix: str, seed: str) -> str:
    """`idGenerator(namespace)`: the prefix and 12 characters of nanoid's alphabet, derived from `seed` here."""
    digest = hashlib.sha256(seed.encode()).digest()
    return f"{prefix}_" + "".join(NANOID_ALPHABET[byte % len(NANOID_ALPHABET)] for byte in digest[:12])


def chunk_prompt(item: SearchChunk) -> str:
    page = f' pageNumber="{item.page_number}" ' if item.page_number else ""
    return (
        f'<chunk fileId="{item.file_id}" fileName="{item.file_name}" similarity="{item.similarity!r}" {page}>'
        f"{item.text}</chunk>"
    )


def chunk_prompts(chunks: Sequence[SearchChunk]) -> str:
    if not chunks:
        return ""
    joined = "\n".join(chunk_prompt(item) for item in chunks)
    return f"<retrieved_chunks>\n{CHUNKS_DOCSTRING}\n{joined}\n</retrieved_chunks>".strip()


def knowledge_prompts(items: Sequence[KnowledgeItem]) -> str:
    if not items:
        return ""

    def one(item: KnowledgeItem) -> str:
        file_type = f' fileType="{item.file_type}" ' if item.file_type else ""
        return f'<knowledge id="{item.id}" name="{item.name}" type="{item.type}"{file_type}></knowledge>'

    joined = "\n".join(one(item) for item in items)
    return f"<knowledge_bases>\n{KNOWLEDGE_DOCSTRING}\n{joined}\n</knowledge_bases>".strip()


def user_query_prompt(user_query: str, rewrite_query: str | None) -> str:
    # The block closes with a second opening tag: the source writes `<user_query>` where `</user_query>` was meant.
    rewrite = f"<rewrite_query>{rewrite_query}</rewrite_query>" if rewrite_query else ""
    return f"<user_query>\n{USER_QUERY_DOCSTRING}\n\n<raw_query>{user_query}</raw_query>\n{rewrite}\n<user_query>"


def knowledge_base_qa_prompts(
    chunks: Sequence[SearchChunk], knowledge: Sequence[KnowledgeItem], user_query: str, rewrite_query: str | None
) -> str:
    """`knowledgeBaseQAPrompts`: the scope, the chunks, then the question, inside `<knowledge_base_qa_info>`."""
    if not chunks:
        return ""
    domains = "/".join(item.name for item in knowledge)
    return (
        f"<knowledge_base_qa_info>\n{QA_INFO_INTRO.format(domains=domains)}\n{ANSWER_INSTRUCTION}\n"
        f"{knowledge_prompts(knowledge)}\n{chunk_prompts(chunks)}\n{user_query_prompt(user_query, rewrite_query)}\n"
        "</knowledge_base_qa_info>"
    )


def search_chunks(chunks: Sequence[Chunk]) -> list[SearchChunk]:
    """The chunks as `semanticSearchForChat` returns them: each file's id from the files table."""
    return [
        SearchChunk(lobe_id("file", chunk.file), chunk.file, similarity, chunk.text)
        for chunk, similarity in zip(chunks, SIMILARITIES, strict=False)
    ]


def _shape(
    name: str,
    chunks: Sequence[Chunk],
    knowledge: Sequence[KnowledgeItem],
    question: str,
    history: Sequence[dict[str, str]],
    rewrite_query: str | None,
) -> AppShape:
    """`internal_coreProcessMessage`: the last user message gets the context after a blank line (trimmed);
    `processMessages` adds no system message for an agent with no system role, no tools and no history summary."""
    found = search_chunks(chunks)
    context = knowledge_base_qa_prompts(found, knowledge, question, rewrite_query)
    messages = [*history, {"role": "user", "content": f"{question}\n\n{context}".strip()}]
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape(name, APP, SOURCE, body, tuple(chunk_prompt(item) for item in found), question)


def lobechat() -> AppShape:
    chunks = [*picked("minilm", 2, 3), *picked("dotprompt", 4), *picked("minilm", 9), *picked("dotprompt", 3)]
    knowledge = [KnowledgeItem(lobe_id("kb", "ML Docs"), "ML Docs", "knowledgeBase")]
    question = "How do I install sentence-transformers and encode a list of sentences with all-MiniLM-L6-v2?"
    # The first message of a topic has no history, so `internal_retrieveChunks` rewrites nothing.
    return _shape("lobechat", chunks, knowledge, question, [], None)


def lobechat_follow_up() -> AppShape:
    chunks = picked("graphqa", 6, 2, 18, 24, 15)
    knowledge = [
        KnowledgeItem(lobe_id("file", "graph_qa_prompts.py"), "graph_qa_prompts.py", "file", "text/x-python"),
        KnowledgeItem(lobe_id("kb", "Graph QA"), "Graph QA", "knowledgeBase"),
    ]
    history = [
        {"role": "user", "content": "Which prompt generates the Cypher statement in the graph QA chains?"},
        {
            "role": "assistant",
            "content": "`CYPHER_GENERATION_TEMPLATE` does: it gives the model the graph schema and asks for a Cypher "
            "statement that uses only the relationship types and properties the schema lists.",
        },
    ]
    question = "And once the query has run, how is the model told to phrase its answer?"
    rewrite = "How does the graph QA answer prompt tell the model to phrase its answer from the Cypher query results?"
    return _shape("lobechat-follow-up", chunks, knowledge, question, history, rewrite)


SHAPES = (lobechat, lobechat_follow_up)
