"""Haystack: RAG pipelines whose `PromptBuilder` or `ChatPromptBuilder` renders a Jinja2 template with a
`{% for document in documents %}` loop, sent by `OpenAIChatGenerator`. Jinja2 keeps the loop's line breaks and
indentation: each document follows its own line of spaces, the first of its lines indented, the others not.

Templates (deepset-ai/haystack@c7cb46c0f28ad1984f60e5d3e9404b124a221437), verbatim: the RAG pipeline example of
`PromptBuilder`'s docstring (haystack/components/builders/prompt_builder.py; the docstring's own four-space margin
removed, as a reader pasting it gets it) and the `ChatPromptBuilder` template of `rag_pipeline` in
e2e/pipelines/test_evaluation_pipeline.py, indentation as written there. Rendered by Jinja2's `SandboxedEnvironment`
with default options, which `HaystackSandboxedEnvironment` (haystack/utils/jinja2_sandbox.py) keeps; the messages are
`ChatMessage.to_openai_dict_format` of a text message, the body `OpenAIChatGenerator._prepare_api_call`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "Haystack"
SOURCE_PROMPT_BUILDER = (
    "deepset-ai/haystack@c7cb46c0f28ad1984f60e5d3e9404b124a221437: haystack/components/builders/prompt_builder.py "
    "(PromptBuilder docstring, RAG pipeline example)"
)
SOURCE_CHAT_PROMPT_BUILDER = (
    "deepset-ai/haystack@c7cb46c0f28ad1984f60e5d3e9404b124a221437: e2e/pipelines/test_evaluation_pipeline.py "
    "rag_pipeline (ChatPromptBuilder template)"
)
PROMPT_BUILDER_TEMPLATE = """
    Given these documents, answer the question.
    Documents:
    {% for doc in documents %}
        {{ doc.content }}
    {% endfor %}

    Question: {{query}}
    Answer:
    """
CHAT_SYSTEM = "You have to answer the following question based on the given context information only."
CHAT_USER_TEMPLATE = """Context:
            {% for document in documents %}
                {{ document.content }}
            {% endfor %}

            Question: {{question}}"""


@dataclass(frozen=True)
class Document:
    """What the templates read of Haystack's `Document`: its `content`."""

    content: str


def render(text: str, **variables: Any) -> str:
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment().from_string(text).render(**variables)


def _documents(chunks: Sequence[Chunk]) -> list[Document]:
    return [Document(chunk.text) for chunk in chunks]


def haystack_prompt_builder() -> AppShape:
    chunks = pydoc_chunks("langchain", 3, 5)
    question = "When is the else clause of a try statement executed?"
    prompt = render(PROMPT_BUILDER_TEMPLATE, documents=_documents(chunks), query=question)
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "stream": False}
    return AppShape(
        "haystack-prompt-builder", APP, SOURCE_PROMPT_BUILDER, body, tuple(c.text for c in chunks), question
    )


def haystack_chat_prompt_builder() -> AppShape:
    chunks = [*picked("dotprompt", 7, 4), *picked("minilm", 0), *picked("maskedarray", 7)]
    question = "How does a .prompt file declare its input schema?"
    user = render(CHAT_USER_TEMPLATE, documents=_documents(chunks), question=question)
    messages = [{"role": "system", "content": render(CHAT_SYSTEM)}, {"role": "user", "content": user}]
    body = {"model": MODEL, "messages": messages, "stream": False}
    return AppShape(
        "haystack-chat-prompt-builder", APP, SOURCE_CHAT_PROMPT_BUILDER, body, tuple(c.text for c in chunks), question
    )


SHAPES = (haystack_prompt_builder, haystack_chat_prompt_builder)
