"""Verba (Weaviate): its window retriever groups the chunks found by document. Each document is written
`Document Title: ...`, then each of its chunks `Chunk: n` (and `High Relevancy: s` for a chunk the search scored,
not for the neighbours the window added) on lines of their own before the text, the documents separated by blank
lines; the whole follows the question in the user turn.

Sources (weaviate/Verba@6fb7c98d729bca91efe6be7d835dc9d36a53905f): the default system message of `Generator`
(goldenverba/components/interfaces.py), verbatim; the join mirrors `WindowRetriever.combine_context`
(goldenverba/components/retriever/WindowRetriever.py) and `OpenAIGenerator.prepare_messages` and
`generate_stream` (goldenverba/components/generation/OpenAIGenerator.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.strategies.app_prompts.corpus import file_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "Verba"
SOURCE = (
    "weaviate/Verba@6fb7c98d729bca91efe6be7d835dc9d36a53905f: goldenverba/components/interfaces.py Generator "
    "System Message; goldenverba/components/retriever/WindowRetriever.py combine_context; "
    "goldenverba/components/generation/OpenAIGenerator.py prepare_messages"
)
SYSTEM_MESSAGE = "You are Verba, a chatbot for Retrieval Augmented Generation (RAG). You will receive a user query and context pieces that have a semantic similarity to that query. Please answer these user queries only with the provided context. Mention documents you used from the context if you use them to reduce hallucination. If the provided documentation does not provide enough information, say so. If the user asks questions about you as a chatbot specifially, answer them naturally. If the answer requires code examples encapsulate them with ```programming-language-name ```. Don't do pseudo-code."  # noqa: E501 - verbatim


@dataclass(frozen=True)
class FoundChunk:
    chunk_id: int
    """0-based, as Verba stores it."""
    score: float
    """0 for a neighbour the window added."""
    content: str


def combine_context(documents: Sequence[tuple[str, Sequence[FoundChunk]]]) -> tuple[str, tuple[str, ...]]:
    """`combine_context` (documents without metadata): the context, and each document's block as written."""
    context = ""
    blocks = []
    for title, chunks in documents:
        block = f"Document Title: {title}\n"
        for chunk in chunks:
            block += f"Chunk: {int(chunk.chunk_id) + 1}\n"
            if chunk.score > 0:
                block += f"High Relevancy: {chunk.score:.2f}\n"
            block += f"{chunk.content}\n"
        context += block + "\n\n"
        blocks.append(block.rstrip("\n"))
    return context, tuple(blocks)


def verba() -> AppShape:
    minilm, dotprompt, guide = file_chunks("minilm"), file_chunks("dotprompt"), file_chunks("maskedarray")
    documents = [
        ("dotprompt-README.md", [FoundChunk(3, 0, dotprompt[3].text), FoundChunk(4, 0.94, dotprompt[4].text)]),
        ("all-MiniLM-L6-v2.md", [FoundChunk(8, 0.71, minilm[8].text)]),
        ("masked-arrays-guide.rst", [FoundChunk(12, 0.52, guide[12].text), FoundChunk(13, 0, guide[13].text)]),
    ]
    question = "What is the basic structure of a .prompt file?"
    context, units = combine_context(documents)
    messages = [
        {"role": "system", "content": SYSTEM_MESSAGE},
        {"role": "user", "content": f"Answer this query: '{question}' with this provided context: {context}"},
    ]
    body = {"messages": messages, "model": MODEL, "stream": True}
    return AppShape("verba", APP, SOURCE, body, units, question)


SHAPES = (verba,)
