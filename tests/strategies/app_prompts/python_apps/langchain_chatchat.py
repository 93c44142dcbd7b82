"""Langchain-Chatchat: its knowledge-base chat. The retrieved documents' texts are joined bare, with no label, title
or number (blank lines between them in 0.3, single line breaks in 0.2), into the `context` of a Chinese RAG template,
which also holds the question; the filled template is the last user message, after the chat history the client sent.
No system message.

The templates are Jinja2 and rendered by LangChain's own `ChatMessagePromptTemplate` (Jinja2 drops the template's
final line break), each history turn wrapped in `{% raw %}` so its text is kept as written.

Sources: 0.3 (chatchat-space/Langchain-Chatchat@49165d6af4438aa7e8a1f71ce276db55f4405151): the default `rag`
template of `PromptSettings` (libs/chatchat-server/chatchat/settings.py), verbatim in
templates/langchain_chatchat_0.3_rag_default.txt; the join and the message list
mirror `kb_chat` (libs/chatchat-server/chatchat/server/chat/kb_chat.py: `"\\n\\n".join` of each doc's
`page_content`, `History.to_msg_template` for the turns, the template as a `user` message) and `History`
(libs/chatchat-server/chatchat/server/chat/utils.py); `get_ChatOpenAI` (chatchat/server/utils.py) streams at the
default `TEMPERATURE` 0.7. 0.2 (tag v0.2.10, @9c525b7fa5b99437cf4d5167a7d062ef778a94b1): the default
`knowledge_base_chat` template of configs/prompt_config.py.example, verbatim in
templates/langchain_chatchat_0.2_knowledge_base_chat_default.txt; `knowledge_base_chat`
(server/chat/knowledge_base_chat.py: `"\\n".join` of `doc.page_content`) and `History` (server/chat/utils.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "Langchain-Chatchat"
SOURCE_0_3 = (
    "chatchat-space/Langchain-Chatchat@49165d6af4438aa7e8a1f71ce276db55f4405151: "
    "libs/chatchat-server/chatchat/settings.py PromptSettings.rag; "
    "libs/chatchat-server/chatchat/server/chat/kb_chat.py kb_chat; "
    "libs/chatchat-server/chatchat/server/chat/utils.py History.to_msg_template"
)
SOURCE_0_2 = (
    "chatchat-space/Langchain-Chatchat@9c525b7fa5b99437cf4d5167a7d062ef778a94b1: "
    "configs/prompt_config.py.example PROMPT_TEMPLATES knowledge_base_chat; "
    "server/chat/knowledge_base_chat.py knowledge_base_chat; server/chat/utils.py History.to_msg_template"
)
RAG_TEMPLATE = "langchain_chatchat_0.3_rag_default.txt"
"""Holds 0.3's `PromptSettings.rag["default"]`, the template `kb_chat` uses when documents were found."""
KNOWLEDGE_BASE_CHAT_TEMPLATE = "langchain_chatchat_0.2_knowledge_base_chat_default.txt"
"""Holds 0.2's `PROMPT_TEMPLATES["knowledge_base_chat"]["default"]`."""
TEMPERATURE = 0.7
"""`TEMPERATURE` of both versions' settings, which `get_ChatOpenAI` passes on."""


def chat_messages(prompt_template: str, history: Sequence[dict[str, str]], context: str, question: str) -> list[Any]:
    """The messages `kb_chat` and `knowledge_base_chat` build: each history turn as a raw Jinja2 chat message with
    its role, then the filled template as a `user` message, formatted by LangChain."""
    from langchain_core.messages import convert_to_openai_messages
    from langchain_core.prompts.chat import ChatMessagePromptTemplate, ChatPromptTemplate

    role_maps = {"ai": "assistant", "human": "user"}
    turns = [
        ChatMessagePromptTemplate.from_template(
            "{% raw %}" + turn["content"] + "{% endraw %}", "jinja2", role=role_maps.get(turn["role"], turn["role"])
        )
        for turn in history
    ]
    input_msg = ChatMessagePromptTemplate.from_template(prompt_template, "jinja2", role="user")
    chat_prompt = ChatPromptTemplate.from_messages([*turns, input_msg])
    return convert_to_openai_messages(chat_prompt.format_messages(context=context, question=question))


def _shape(
    name: str,
    source: str,
    template_file: str,
    separator: str,
    chunks: Sequence[Chunk],
    question: str,
    history: Sequence[dict[str, str]] = (),
) -> AppShape:
    context = separator.join(chunk.text for chunk in chunks)
    messages = chat_messages(template(template_file), history, context, question)
    # What langchain-openai's ChatOpenAI sends when streaming: `n` and the temperature, `max_tokens` left out (None).
    body = {"messages": messages, "model": MODEL, "n": 1, "stream": True, "temperature": TEMPERATURE}
    return AppShape(name, APP, source, body, tuple(chunk.text for chunk in chunks), question)


def langchain_chatchat() -> AppShape:
    """0.3 `kb_chat` on a local knowledge base, `top_k` raised to 5 in the chat's settings, no earlier turns: five
    chunks of two Markdown files, joined by blank lines."""
    chunks = [*picked("minilm", 2, 3, 5), *picked("dotprompt", 3, 4)]
    question = "all-MiniLM-L6-v2 怎么用 sentence-transformers 计算句子向量？只有 transformers 的话又该怎么做？"  # noqa: RUF001 - Chinese punctuation
    return _shape("langchain-chatchat", SOURCE_0_3, RAG_TEMPLATE, "\n\n", chunks, question)


def langchain_chatchat_0_2() -> AppShape:
    """0.2.10 `knowledge_base_chat`, a second question after one exchange (the web UI sends the earlier turns as
    `history`), `top_k` 4: the chunks joined by single line breaks, the first opening with its own `Question:` line."""
    history = [
        {"role": "user", "content": "graph_qa_prompts.py 里有哪些问答模板？"},  # noqa: RUF001 - Chinese punctuation
        {
            "role": "assistant",
            "content": "有 CYPHER_QA_PROMPT、SPARQL_QA_PROMPT、GRAPHDB_QA_PROMPT 和 AQL_QA_PROMPT 等，"  # noqa: RUF001 - Chinese punctuation
            "它们都根据查询结果生成自然语言回答。",
        },
    ]
    chunks = picked("graphqa", 6, 5, 14, 18)
    question = "CYPHER_QA_PROMPT 的示例里，哪些 manager 持有 Neo4j 的股票？"  # noqa: RUF001 - Chinese punctuation
    return _shape("langchain-chatchat-0.2", SOURCE_0_2, KNOWLEDGE_BASE_CHAT_TEMPLATE, "\n", chunks, question, history)


SHAPES = (langchain_chatchat, langchain_chatchat_0_2)
