"""Onyx (formerly Danswer): the answering call after its `internal_search` tool ran. The search results come back
as one tool message, a JSON object whose `results` list holds one object per section (sections of one document share
its `document` number); the assistant's tool call comes before it, the question before that, and a
`<system-reminder>` user turn asking for citations comes last.

Sources (onyx-dot-app/onyx@a7d66a8b778c3f9026c4f89dae47d14a3f84816f): `DEFAULT_SYSTEM_PROMPT` of
backend/onyx/prompts/chat_prompts.py as the module computes it (templates/onyx_default_system_prompt.txt) and its
`REQUIRE_CITATION_GUIDANCE`, `CITATION_REMINDER`, backend/onyx/prompts/tool_prompts.py's `TOOL_SECTION_HEADER`,
`TOOL_DESCRIPTION_SEARCH_GUIDANCE`, `INTERNAL_SEARCH_GUIDANCE` and backend/onyx/prompts/constants.py's
`REMINDER_TAG_DESCRIPTION` (templates/onyx_prompts.json), all verbatim. The join mirrors
`convert_inference_sections_to_llm_string` (backend/onyx/tools/tool_implementations/utils.py), `build_system_prompt`
(backend/onyx/chat/prompt_utils.py) with `apply_prompt_placeholders` (backend/onyx/prompts/prompt_utils.py),
`construct_message_history` and `build_reminder_message` (backend/onyx/chat/llm_loop.py, prompt_utils.py),
`translate_history_to_llm_format` and `_build_structured_assistant_message` (backend/onyx/chat/llm_step.py), and
`SearchTool.tool_definition` (backend/onyx/tools/tool_implementations/search/search_tool.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.strategies.app_prompts.corpus import picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "Onyx"
SOURCE = (
    "onyx-dot-app/onyx@a7d66a8b778c3f9026c4f89dae47d14a3f84816f: backend/onyx/prompts/chat_prompts.py "
    "DEFAULT_SYSTEM_PROMPT, CITATION_REMINDER; backend/onyx/prompts/tool_prompts.py; "
    "backend/onyx/tools/tool_implementations/utils.py convert_inference_sections_to_llm_string; "
    "backend/onyx/chat/llm_loop.py construct_message_history; backend/onyx/chat/llm_step.py"
)
DAY = "Thursday August 20, 2026"
"""`get_current_llm_day_time(full_sentence=False, include_day_of_week=True)` on a fixed day."""
TOOL_CALL_ID = "call_8f3kQ2vZx1"
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "internal_search",
        "description": "Search connected applications for information.",
        "parameters": {
            "type": "object",
            "properties": {
                "queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": (
                        "List of search queries to execute, typically a single query. "
                        "Query expansion and filter extraction steps will be run "
                        "automatically downstream, do not include time or source type "
                        "scoping details in your query."
                    ),
                },
            },
            "required": ["queries"],
        },
    },
}


@dataclass(frozen=True)
class Section:
    document_id: str
    title: str
    updated_at: str
    content: str


def results_json(sections: Sequence[Section]) -> tuple[str, tuple[str, ...]]:
    """`convert_inference_sections_to_llm_string` (source type shown, no link, no document id, no file): the JSON
    the model reads, and each result object as it is written inside it."""
    citation_of: dict[str, int] = {}
    for section in sections:
        citation_of.setdefault(section.document_id, len(citation_of) + 1)
    results = [
        {
            "document": citation_of[s.document_id],
            "title": s.title,
            "updated_at": s.updated_at,
            "source_type": "web",
            "content": s.content,
        }
        for s in sections
    ]
    text = json.dumps({"results": results}, indent=2, ensure_ascii=False)
    # Each result sits two levels deep (`{"results": [ ... ]}`): its lines are indented four more spaces.
    written = tuple(json.dumps(r, indent=2, ensure_ascii=False).replace("\n", "\n    ") for r in results)
    return text, written


def system_prompt() -> str:
    """`build_system_prompt` for the default persona after a search ran: placeholders filled, citations required,
    the search tools' guidance under `# Tools`."""
    constants = json.loads(template("onyx_prompts.json"))
    prompt = template("onyx_default_system_prompt.txt")
    prompt = prompt.replace("{{REMINDER_TAG_DESCRIPTION}}", constants["REMINDER_TAG_DESCRIPTION"])
    prompt = prompt.replace("{{CURRENT_DATETIME}}", DAY)
    prompt = prompt.replace("{{CITATION_GUIDANCE}}", constants["REQUIRE_CITATION_GUIDANCE"])
    sections = [constants["TOOL_DESCRIPTION_SEARCH_GUIDANCE"], constants["INTERNAL_SEARCH_GUIDANCE"]]
    return str(prompt + constants["TOOL_SECTION_HEADER"] + "\n".join(sections))


def onyx() -> AppShape:
    card = ("https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "2026-06-02T14:05:00")
    page = ("https://docs.python.org/3/reference/compound_stmts.html", "Compound statements", "2026-05-11T08:30:00")
    minilm, reference = picked("minilm", 8, 9, 2), pydoc_chunks("llamaindex", 0, 2)
    sections = [
        Section(*card, minilm[0].text),
        Section(*page, reference[0].text),
        Section(*card, minilm[1].text),
        Section(*page, reference[1].text),
        Section(*card, minilm[2].text),
    ]
    question = "What is all-MiniLM-L6-v2 intended for, and how long can its input be?"
    tool_result, units = results_json(sections)
    constants = json.loads(template("onyx_prompts.json"))
    call: dict[str, Any] = {
        "id": TOOL_CALL_ID,
        "type": "function",
        "function": {"name": "internal_search", "arguments": json.dumps({"queries": [question]})},
    }
    messages = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": tool_result, "tool_call_id": TOOL_CALL_ID},
        {"role": "user", "content": f"<system-reminder>\n{constants['CITATION_REMINDER']}\n</system-reminder>"},
    ]
    body = {"model": MODEL, "messages": messages, "tools": [SEARCH_TOOL], "tool_choice": "auto", "stream": True}
    return AppShape("onyx", APP, SOURCE, body, units, question)


SHAPES = (onyx,)
