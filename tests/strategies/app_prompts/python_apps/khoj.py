"""Khoj: a chat with the user's synced notes. The notes found are dumped as a YAML list (`query`, `compiled`, `file`,
`uri` for each) under `User's Notes:` in a user turn of their own, before the question's turn; every message's content
is a list of text parts, as Khoj sends them to an OpenAI-compatible server that is not OpenAI's.

Sources (khoj-ai/khoj@ae229ca894c0b80ad84664afcfdde523b5e87057): `personality` and `notes_conversation` of
src/khoj/processor/conversation/prompts.py, verbatim; the join mirrors `build_conversation_context`
(src/khoj/routers/helpers.py), `yaml_dump` (src/khoj/utils/yaml.py, PyYAML itself runs here),
`generate_chatml_messages_with_context` (src/khoj/processor/conversation/utils.py), `format_message_for_api`
(src/khoj/processor/conversation/openai/utils.py), the compiled references of `search_documents`
(src/khoj/routers/helpers.py) and the entry text of `MarkdownToEntries` (the file name as a top heading,
src/khoj/processor/content/markdown/markdown_to_entries.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked, uploaded_file
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "Khoj"
SOURCE = (
    "khoj-ai/khoj@ae229ca894c0b80ad84664afcfdde523b5e87057: src/khoj/processor/conversation/prompts.py personality, "
    "notes_conversation; src/khoj/routers/helpers.py build_conversation_context; src/khoj/utils/yaml.py yaml_dump; "
    "src/khoj/processor/conversation/utils.py generate_chatml_messages_with_context"
)
PERSONALITY = """
You are Khoj, a smart, curious, empathetic and helpful personal assistant.
Use your general knowledge and past conversation with the user as context to inform your responses.

You were created by Khoj Inc. More information about you, the company or Khoj apps can be found at https://khoj.dev.

Today is {day_of_week}, {current_date} in UTC.

# Capabilities
- Users can share files and other information with you using the Khoj Web, Desktop, Obsidian or Emacs app. They can also drag and drop their files into the chat window.
- You can look up information from the user's notes and documents synced via the Khoj apps.
- You can generate images, look-up real-time information from the internet, analyze data and answer questions based on the user's notes.

# Style
- Your responses should be helpful, conversational and tuned to the user's communication style.
- Provide inline citations to documents and websites referenced. Add them inline in markdown format to directly support your claim.
  For example: "The weather today is sunny [1](https://weather.com)."
- KaTeX is used to render LaTeX expressions. Make sure you only use the KaTeX math mode delimiters specified below:
  - inline math mode : \\( and \\)
  - display math mode: insert linebreak after opening $$, \\[ and before closing $$, \\]
- Do not respond with raw programs or scripts in your final response unless you know the user is a programmer or has explicitly requested code.
""".strip()  # noqa: E501 - verbatim
NOTES_CONVERSATION = """
Use my personal notes and our past conversations to inform your response.
Ask crisp follow-up questions to get additional context, when a helpful response cannot be provided from the provided notes or past conversations.

User's Notes:
-----
{references}
""".strip()  # noqa: E501 - verbatim


def yaml_dump(data: Any) -> str:
    """Khoj's `yaml_dump`: PyYAML, no tags, keys in their order, block style."""
    import yaml

    return str(yaml.dump(data, allow_unicode=True, sort_keys=False, default_flow_style=False))


def compiled_reference(chunk: Chunk, folder: str, query: str) -> dict[str, str]:
    """One search hit as `search_documents` compiles it: the entry text `MarkdownToEntries` stored (the file name
    as a top heading, a heading entry one level deeper), its file and its line."""
    path = f"{folder}/{chunk.file}"
    heading = bool(re.search(r"^#+\s", chunk.text))
    prefix = f"# {path}\n#" if heading else f"# {path}\n"
    text = uploaded_file(chunk.file)
    line = text[: text.find(chunk.text)].count("\n") + 1
    return {"query": query, "compiled": f"{prefix}{chunk.text}", "file": path, "uri": f"file://{path}#line={line}"}


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def khoj() -> AppShape:
    question = "How do I use the dotprompt manager with a role-based prompt file?"
    inferred = "dotprompt role-based prompt file system user messages"
    chunks: Sequence[Chunk] = [*picked("dotprompt", 7, 0, 8), *picked("minilm", 1, 6)]
    references = [compiled_reference(c, "/home/ana/notes", inferred) for c in chunks]
    units = tuple(yaml_dump([reference]).rstrip("\n") for reference in references)
    assert yaml_dump(references) == "".join(f"{unit}\n" for unit in units), "each reference dumps as it does alone"
    system = PERSONALITY.format(day_of_week="Thursday", current_date="2026-08-20")
    context = f"{NOTES_CONVERSATION.format(references=yaml_dump(references))}\n\n".strip()
    messages = [_message("system", system), _message("user", context), _message("user", question)]
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape("khoj", APP, SOURCE, body, units, question)


SHAPES = (khoj,)
