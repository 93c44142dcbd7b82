"""Flowise: its Conversational Retrieval QA Chain. Each retrieved chunk is a `<doc id='n'>...</doc>` element (ids
running from 0, the chunk's text right inside the tags), the elements joined by line breaks into `{context}` of the
default response prompt, which sits between two `------------` rules in the system message; the chat history follows
as user and assistant turns, and the question, as typed, is the last user message.

With history, the chain first sends a separate request (the rephrase prompt, holding the history and the question, no
documents) and retrieves with the standalone question it gets back; the answer request below still carries the
question as the user typed it.

Sources (FlowiseAI/Flowise@ababf4c8ebc0263e03aeeb917832251d3fd785e4): `RESPONSE_TEMPLATE` of
packages/components/nodes/chains/ConversationalRetrievalQAChain/prompts.ts, verbatim (the node's default Response
Prompt); the join and the messages mirror `formatDocs`, `serializeHistory` and `createChain` (a `ChatPromptTemplate` of
`['system', responsePrompt]`, `MessagesPlaceholder('chat_history')`, `['human', '{question}']`) in
packages/components/nodes/chains/ConversationalRetrievalQAChain/ConversationalRetrievalQAChain.ts.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "Flowise"
SOURCE = (
    "FlowiseAI/Flowise@ababf4c8ebc0263e03aeeb917832251d3fd785e4: "
    "packages/components/nodes/chains/ConversationalRetrievalQAChain/prompts.ts RESPONSE_TEMPLATE; "
    "packages/components/nodes/chains/ConversationalRetrievalQAChain/ConversationalRetrievalQAChain.ts formatDocs, "
    "serializeHistory, createChain"
)
RESPONSE_TEMPLATE = (
    'I want you to act as a document that I am having a conversation with. Your name is "AI Assistant". Using the '
    "provided context, answer the user's question to the best of your ability using the resources provided.\n"
    'If there is nothing in the context relevant to the question at hand, just say "Hmm, I\'m not sure" and stop '
    "after that. Refuse to answer any question not about the info. Never break character.\n"
    "------------\n"
    "{context}\n"
    "------------\n"
    "REMEMBER: If there is no relevant information within the context, just say \"Hmm, I'm not sure\". Don't try to "
    "make up an answer. Never break character."
)


def format_docs(chunks: Sequence[Chunk]) -> list[str]:
    """`formatDocs`: each document's `pageContent` in a `<doc>` element, its index as `id`."""
    return [f"<doc id='{i}'>{chunk.text}</doc>" for i, chunk in enumerate(chunks)]


def _shape(name: str, chunks: Sequence[Chunk], turns: Sequence[tuple[str, str]], question: str) -> AppShape:
    """`createChain`'s answer step: the filled response prompt as the system message, the history (`userMessage`
    and `apiMessage` turns as `serializeHistory` converts them), then the question."""
    docs = format_docs(chunks)
    system = RESPONSE_TEMPLATE.format(context="\n".join(docs))
    roles = {"userMessage": "user", "apiMessage": "assistant"}
    history = [{"role": roles[kind], "content": text} for kind, text in turns]
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    # Flowise's ChatOpenAI node streams by default.
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape(name, APP, SOURCE, body, tuple(docs), question)


def flowise() -> AppShape:
    """A first question: no history, the chain retrieves with the question itself."""
    chunks = [*picked("minilm", 2, 3, 4), *picked("dotprompt", 4), *picked("minilm", 8)]
    question = "How do I get sentence embeddings from all-MiniLM-L6-v2 without the sentence-transformers package?"
    return _shape("flowise", chunks, (), question)


def flowise_follow_up() -> AppShape:
    """A second question in a session: the earlier exchange as stored, chunks of a prompt module whose worked
    example quotes its own `Question:` and `Helpful Answer:` lines."""
    turns = [
        ("userMessage", "Which prompt turns a question into a Cypher statement?"),
        (
            "apiMessage",
            "CYPHER_GENERATION_TEMPLATE does: it asks for a Cypher statement that uses only the relationship types "
            "and properties in the schema.",
        ),
    ]
    chunks = [*picked("graphqa", 6, 2, 31, 1), *picked("dotprompt", 7)]
    question = "And what does the QA prompt tell the model to say when the information is empty?"
    return _shape("flowise-follow-up", chunks, turns, question)


SHAPES = (flowise, flowise_follow_up)
