"""LlamaIndex's chat engines, run by `llama_index.core` itself: `ContextChatEngine` and
`CondensePlusContextChatEngine`, each with its default context prompt, over a fixed retriever, a fake LLM that records
the messages of its last chat call, and an earlier exchange in the chat history. The recorded messages are turned into
OpenAI's shape by `llama_index.llms.openai.utils.to_openai_message_dicts`, as `OpenAILike` sends them. Nodes carry a
`file_name`; each document is the node's `get_content(MetadataMode.LLM)`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "LlamaIndex chat engines"
EARLIER_QUESTION = "What does the pass statement do?"
EARLIER_ANSWER = "It does nothing: it is a placeholder where a statement is required syntactically."


def _source(engine: str) -> str:
    return f"llama-index-core {metadata.version('llama-index-core')} (installed): {engine}.from_defaults"


def _run(engine_name: str, chunks: Sequence[Chunk], question: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    import tiktoken
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        CompletionResponseGen,
        LLMMetadata,
    )
    from llama_index.core.chat_engine import CondensePlusContextChatEngine, ContextChatEngine
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.memory import ChatMemoryBuffer
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
    from llama_index.llms.openai.utils import to_openai_message_dicts

    from contextlift.strategies.tokens import ENCODING

    recorded: list[list[ChatMessage]] = []

    class RecordingFakeLLM(CustomLLM):
        """Answers every call with a fixed text; records the messages of each chat call."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=16_000, num_output=256, is_chat_model=True, model_name=MODEL)

        @llm_chat_callback()
        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            recorded.append(list(messages))
            return ChatResponse(message=ChatMessage(role="assistant", content="A fake answer."))

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            return CompletionResponse(text="A fake standalone question?")  # the condense step's call

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
            raise NotImplementedError

    class FixedRetriever(BaseRetriever):
        def __init__(self, nodes: list[NodeWithScore]) -> None:
            super().__init__()
            self._nodes = nodes

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return self._nodes

    nodes = [NodeWithScore(node=TextNode(text=c.text, metadata={"file_name": c.file}), score=0.8) for c in chunks]
    # The offline copy of cl100k_base: LlamaIndex's default tokenizer would download it.
    memory = ChatMemoryBuffer.from_defaults(token_limit=6_000, tokenizer_fn=tiktoken.get_encoding(ENCODING).encode)
    engine_class = ContextChatEngine if engine_name == "ContextChatEngine" else CondensePlusContextChatEngine
    engine = engine_class.from_defaults(retriever=FixedRetriever(nodes), llm=RecordingFakeLLM(), memory=memory)
    history = [
        ChatMessage(role="user", content=EARLIER_QUESTION),
        ChatMessage(role="assistant", content=EARLIER_ANSWER),
    ]
    # The sync `chat` runs its async steps with `asyncio.get_event_loop()`, which makes a loop for the thread and
    # leaves it open: it gets one of ours, closed after. (Left open, the loop was freed by the collector many tests
    # later, and its ResourceWarning failed whichever test collected it.)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        engine.chat(question, chat_history=history)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    messages = to_openai_message_dicts(recorded[-1], model=MODEL)
    units = tuple(n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes)
    return {"model": MODEL, "messages": messages, "stream": False}, units


def llamaindex_context_chat() -> AppShape:
    chunks = pydoc_chunks("llamaindex", 2, 5, file="compound_stmts.txt")
    question = "Can a with statement manage more than one context manager at once?"
    body, units = _run("ContextChatEngine", chunks, question)
    return AppShape("llamaindex-context-chat", APP, _source("ContextChatEngine"), body, units, question)


def llamaindex_condense_plus_context() -> AppShape:
    chunks = [*picked("maskedarray", 9, 12, 0), *picked("minilm", 3)]
    question = "How does matplotlib import masked arrays by default?"
    body, units = _run("CondensePlusContextChatEngine", chunks, question)
    return AppShape(
        "llamaindex-condense-plus-context", APP, _source("CondensePlusContextChatEngine"), body, units, question
    )


SHAPES = (llamaindex_context_chat, llamaindex_condense_plus_context)
