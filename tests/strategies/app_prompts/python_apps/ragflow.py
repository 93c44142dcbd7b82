"""RAGFlow: a chat assistant's request. Each chunk is an `ID: n` node with `├── Title:` and `└── Content:` lines,
the nodes joined by `------` lines into the `{knowledge}` of the assistant's system prompt, and its citation
guidelines appended straight after (their examples hold `ID:` nodes of their own); the turns follow, the question
last.

Sources (infiniflow/ragflow@b1b8cd623520b97b2526ffb1514bd812bdcc7eaf): the default system prompt
`_DEFAULT_PROMPT_CONFIG["system"]` of api/apps/restful_apis/chat_api.py (templates/ragflow_default_system.txt) and
rag/prompts/citation_prompt.md (templates/ragflow_citation_prompt.md), both verbatim. The join mirrors `kb_prompt`
and its `draw_node` (rag/prompts/generator.py), `async_chat`'s knowledge join and message list
(api/db/services/dialog_service.py) and `citation_prompt` (rag/prompts/generator.py, rendered here by Jinja2's
`SandboxedEnvironment` with RAGFlow's options); `async_chat` of rag/llm/chat_model.py puts the system prompt first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "RAGFlow"
SOURCE = (
    "infiniflow/ragflow@b1b8cd623520b97b2526ffb1514bd812bdcc7eaf: api/apps/restful_apis/chat_api.py "
    "_DEFAULT_PROMPT_CONFIG; rag/prompts/citation_prompt.md; rag/prompts/generator.py kb_prompt, citation_prompt; "
    "api/db/services/dialog_service.py async_chat"
)


def _draw_node(key: str, line: Any) -> str:
    if line is not None and not isinstance(line, str):
        line = str(line)
    if not line:
        return ""
    return f"\n├── {key}: " + re.sub(r"\n+", " ", line, flags=re.DOTALL)


def kb_prompt(chunks: Sequence[Chunk]) -> list[str]:
    """`kb_prompt` (no token limit reached, no document metadata): each chunk as an `ID:` node."""
    knowledges = []
    for i, chunk in enumerate(chunks):
        node = f"\nID: {i}"
        node += _draw_node("Title", chunk.file)
        node += _draw_node("URL", "")
        node += "\n└── Content:\n"
        node += chunk.text
        knowledges.append(node)
    return knowledges


def citation_prompt() -> str:
    """`citation_prompt()` with no user-defined guidelines: the prompt file (stripped, as `load_prompt` reads it)
    rendered by Jinja2, then RAGFlow's note on the example IDs."""
    from jinja2.sandbox import SandboxedEnvironment

    environment = SandboxedEnvironment(autoescape=False, trim_blocks=True, lstrip_blocks=True)
    guidelines = environment.from_string(template("ragflow_citation_prompt.md").strip())
    return (
        guidelines.render()
        + "\n\nIMPORTANT: The example IDs above (45, 46, 78, etc.) are illustrative only. Use the actual chunk IDs "
        "from the provided knowledge blocks."
    )


def _shape(name: str, chunks: Sequence[Chunk], turns: Sequence[dict[str, str]]) -> AppShape:
    """`async_chat`: the knowledge in the system prompt, the citation guidelines straight after it, then the turns
    the client sent (citation markers `##n$$` removed), the question last."""
    knowledges = kb_prompt(chunks)
    knowledge = "\n------\n" + "\n\n------\n\n".join(knowledges)
    system = template("ragflow_default_system.txt").format(knowledge=knowledge)
    history = [{"role": m["role"], "content": re.sub(r"##\d+\$\$", "", m["content"])} for m in turns]
    messages = [{"role": "system", "content": system + citation_prompt()}, *history]
    body = {"model": MODEL, "messages": messages, "stream": True}
    question = turns[-1]["content"]
    return AppShape(name, APP, SOURCE, body, tuple(k.lstrip("\n") for k in knowledges), question)


def ragflow() -> AppShape:
    chunks = [*picked("minilm", 3, 8), *pydoc_chunks("langchain", 1, 2), *picked("dotprompt", 4)]
    question = "What pooling does all-MiniLM-L6-v2 use to turn token embeddings into one sentence vector?"
    return _shape("ragflow", chunks, [{"role": "user", "content": question}])


def ragflow_follow_up() -> AppShape:
    """A second question: the earlier answer as RAGFlow stored it, its `##n$$` citation markers removed."""
    turns = [
        {"role": "user", "content": "What is a masked array?"},
        {
            "role": "assistant",
            "content": "A masked array is an ndarray subclass that carries a mask of invalid entries ##0$$.",
        },
        {"role": "user", "content": "Does the new MaskedArray keep the subclass of its data?"},
    ]
    return _shape("ragflow-follow-up", picked("maskedarray", 3, 4, 5, 6), turns)


SHAPES = (ragflow, ragflow_follow_up)
