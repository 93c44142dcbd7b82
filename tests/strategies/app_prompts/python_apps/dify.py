"""Dify: a Chatbot app in basic mode with a knowledge base. The retrieved segments are joined by single line breaks
into `<context>` in the system prompt, the question is the user turn.

Sources (langgenius/dify): the prompt rules api/core/prompt/prompt_templates/common_chat.json
(@7d33794853f4f4da00f0657901de21620e952120, verbatim in templates/dify_common_chat.json). The join mirrors
`DatasetRetrieval.retrieve`'s `"\\n".join(document_context_list)` (api/core/rag/retrieval/dataset_retrieval.py
@000e855007e34a492537f29611c8af6066f762f4), `SimplePromptTransform.get_prompt_template` and
`_get_chat_model_prompt_messages` (api/core/prompt/simple_prompt_transform.py
@04bcf81d0aec021198ca50aa7466c2106f8343e0) and `PromptTemplateParser.format`, which turns any `{{variable}}` written
inside a segment into `{variable}` (api/core/prompt/utils/prompt_template_parser.py
@0378f96f7a4fe00d33d5d708ff5643e2c2e3ffd9).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "Dify"
SOURCE = (
    "langgenius/dify@7d33794853f4f4da00f0657901de21620e952120: api/core/prompt/prompt_templates/common_chat.json; "
    "@000e855007e34a492537f29611c8af6066f762f4: api/core/rag/retrieval/dataset_retrieval.py retrieve; "
    "@04bcf81d0aec021198ca50aa7466c2106f8343e0: api/core/prompt/simple_prompt_transform.py; "
    "@0378f96f7a4fe00d33d5d708ff5643e2c2e3ffd9: api/core/prompt/utils/prompt_template_parser.py"
)
VARIABLE = re.compile(r"\{\{([a-zA-Z_][a-zA-Z0-9_]{0,29}|#histories#|#query#|#context#)\}\}")
"""`prompt_template_parser.REGEX`."""


def fill(text: str, inputs: Mapping[str, str]) -> str:
    """`PromptTemplateParser(text).format(inputs)`: each value has its own template variables defused."""

    def replacer(match: re.Match[str]) -> str:
        value = inputs.get(match.group(1), match.group(0))
        return VARIABLE.sub(r"{\1}", value)

    return re.sub(r"<\|.*?\|>", "", VARIABLE.sub(replacer, text))


def _shape(
    name: str, chunks: Sequence[Chunk], question: str, pre_prompt: str, history: Sequence[dict[str, str]]
) -> AppShape:
    """`_get_chat_model_prompt_messages`: the system prompt in the rules' order (context, then the app's
    instructions; the histories prompt is for completion models), the memory's turns, the question."""
    rules = json.loads(template("dify_common_chat.json"))
    prompt = ""
    for order in rules["system_prompt_orders"]:
        if order == "context_prompt":
            prompt += rules["context_prompt"]
        elif order == "pre_prompt" and pre_prompt:
            prompt += pre_prompt + "\n"
    segments = [chunk.text for chunk in chunks]
    system = fill(prompt, {"#context#": "\n".join(segments)})
    units = tuple(VARIABLE.sub(r"{\1}", segment) for segment in segments)
    messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": question}]
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape(name, APP, SOURCE, body, units, question)


def dify() -> AppShape:
    """The default: no instructions of the app's own."""
    chunks = [*picked("dotprompt", 1, 3, 7), *picked("minilm", 6, 9)]
    question = "Which Handlebars variables can a dotprompt template use for the system context?"
    return _shape("dify", chunks, question, "", [])


def dify_instructions() -> AppShape:
    """With the app's instructions after the context, and the conversation's memory before the question."""
    instructions = "You are the documentation assistant of the data platform team. Answer in English, briefly."
    history = [
        {"role": "user", "content": "Where do the MaskedArray notes come from?"},
        {"role": "assistant", "content": "From the NumPy guide to masked arrays by Pierre G.F. Gerard-Marchant."},
    ]
    question = "Is mrecords still experimental?"
    return _shape("dify-instructions", picked("maskedarray", 10, 11, 9, 0), question, instructions, history)


SHAPES = (dify, dify_instructions)
