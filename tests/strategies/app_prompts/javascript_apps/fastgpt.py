"""FastGPT: an AI chat node (a simple app's, or a workflow's) fed by a knowledge base search. Each quote is written
by the quote template as a JSON-looking object (`"id"`, `"sourceName"`, `"updateTime"`, `"content"`, the content's
line breaks and quotes left raw), the quotes joined by `------` lines into `{{quote}}` of the quote prompt, which
closes with them inside `<Cites></Cites>`. By default (quote role `system`) that prompt is the system message, after
the app's own system prompt and a `===---===---===` separator, and the question is the last user message as typed;
with the quote role `user` the prompt holds the question too (`## 用户问题`, then `## 回答`) and replaces it.

Sources (labring/FastGPT@f59d70baa00e6c273c5e82a53aeaf3bb212f92e3): the standard templates
`Prompt_QuoteTemplateList[0]`, `Prompt_systemQuotePromptList[0]` and `Prompt_userQuotePromptList[0]` (version 4.9.7,
the chat node's version) of packages/global/core/ai/prompt/AIChat.ts, verbatim (the quote prompts in
templates/fastgpt_system_quote_prompt.txt and templates/fastgpt_user_quote_prompt.txt, as their template literals
evaluate). The join mirrors `filterDatasetQuote` and `getChatMessages` (packages/service/core/workflow/dispatch/ai/
chat.ts), `replaceVariable` (packages/global/common/string/tools.ts), `chats2GPTMessages`
(packages/global/core/chat/adapt.ts) and `loadRequestMessages` (packages/service/core/chat/utils.ts); the quote role
defaults to `system` in `AiChatQuoteRole` (packages/global/core/workflow/template/system/aiChat/index.ts).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "FastGPT"
SOURCE = (
    "labring/FastGPT@f59d70baa00e6c273c5e82a53aeaf3bb212f92e3: packages/global/core/ai/prompt/AIChat.ts "
    "Prompt_QuoteTemplateList, Prompt_systemQuotePromptList, Prompt_userQuotePromptList; "
    "packages/service/core/workflow/dispatch/ai/chat.ts filterDatasetQuote, getChatMessages; "
    "packages/global/common/string/tools.ts replaceVariable; packages/service/core/chat/utils.ts loadRequestMessages"
)
QUOTE_TEMPLATE = (
    '{\n  "id": "{{id}}",\n  "sourceName": "{{source}}",\n'
    '  "updateTime": "{{updateTime}}",\n  "content": "{{q}}\n{{a}}"\n}\n'
)
"""`Prompt_QuoteTemplateList[0].value['4.9.7']` (the standard template)."""
SYSTEM_PROMPT_SEPARATOR = "\n\n===---===---===\n\n"
MAX_REPLACEMENT_DEPTH = 10


def replace_variable(text: str, values: Mapping[str, str], depth: int = 0) -> str:
    """`replaceVariable`: every `{{key}}` replaced key by key (a value that holds its own key is skipped), again while
    the result still holds a `{{...}}`, at most ten times."""
    if depth > MAX_REPLACEMENT_DEPTH:
        return text
    result = text
    replaced = False
    for key, value in values.items():
        variable = "{{" + key + "}}"
        if variable in value:
            continue
        result = result.replace(variable, value)  # its `new RegExp("{{(key)}}", "g")`, the value taken literally
        replaced = True
    if replaced and re.search(r"\{\{[^}]+\}\}", result):
        result = replace_variable(result, values, depth + 1)
    return result


def quote_id(chunk: Chunk, index: int) -> str:
    """A dataset data `_id`: a MongoDB ObjectId, 24 hex digits (derived from the chunk so every run is the same)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, chunk.file + str(index)).hex[:24]


def quote_units(chunks: Sequence[Chunk]) -> list[str]:
    """`filterDatasetQuote`'s `getValue`: each search result (`q` the chunk, `a` empty) through the quote template,
    trimmed."""
    units = []
    for index, chunk in enumerate(chunks):
        values = {
            "id": quote_id(chunk, index),
            "q": chunk.text,
            "a": "",
            "updateTime": f"2025-08-1{index % 8} 1{index}:2{index}",
            "source": chunk.file,
            "sourceId": "",
            "index": str(index + 1),
        }
        units.append(replace_variable(QUOTE_TEMPLATE, values).strip())
    return units


def _shape(
    name: str,
    chunks: Sequence[Chunk],
    question: str,
    quote_role: str,
    system_prompt: str,
    history: Sequence[tuple[str, str]],
) -> AppShape:
    """`getChatMessages`: the model's default system prompt (none), the app's system prompt and, for the `system`
    quote role, the quote prompt, joined by the separator into one system message; the history's turns; the user
    input, which for the `user` quote role is the quote prompt holding the question."""
    units = quote_units(chunks)
    quote = "\n------\n".join(units)
    if quote_role == "user":
        prompt = template("fastgpt_user_quote_prompt.txt")
        user_input = replace_variable(prompt, {"quote": quote, "question": question})
        system = system_prompt
    else:
        prompt = template("fastgpt_system_quote_prompt.txt")
        user_input = question
        system = SYSTEM_PROMPT_SEPARATOR.join(
            part for part in (system_prompt, replace_variable(prompt, {"quote": quote})) if part
        )
    messages: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []
    for asked, answered in history:
        messages.extend(({"role": "user", "content": asked}, {"role": "assistant", "content": answered}))
    messages.append({"role": "user", "content": user_input})
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape(name, APP, SOURCE, body, tuple(units), question)


def fastgpt() -> AppShape:
    """A simple app as created: no system prompt of its own, the quotes in the system message."""
    chunks = [*picked("minilm", 2, 3, 4), *picked("dotprompt", 3, 4)]
    question = "How do I get sentence embeddings from all-MiniLM-L6-v2 without sentence-transformers?"
    return _shape("fastgpt", chunks, question, "system", "", [])


def fastgpt_user_quote() -> AppShape:
    """A workflow's chat node with the quote role `user`, a system prompt of the app's own, and one earlier exchange
    whose answer kept its `[id](CITE)` marks."""
    chunks = picked("graphqa", 6, 18, 24, 31)
    earlier = quote_id(chunks[1], 1)
    history = [
        (
            "Which template turns GraphDB SPARQL results into an answer?",
            f"GRAPHDB_QA_TEMPLATE generates a natural language response from the query results[{earlier}](CITE).",
        )
    ]
    system_prompt = "You are the support assistant of the graph database team. Answer briefly."
    question = "What worked example does the Cypher QA prompt give, and how should the answer read?"
    return _shape("fastgpt-user-quote", chunks, question, "user", system_prompt, history)


SHAPES = (fastgpt, fastgpt_user_quote)
