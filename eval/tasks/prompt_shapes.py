"""The prompt shapes real apps send: one question and its documents rendered as a framework's default
question-answering chain renders them, so that a team measures lift on the shape its own app sends
(`--option litm-qa.prompt=SHAPE`, `--option swim.prompt=SHAPE`).

| shape | what the app calls | documents as |
|---|---|---|
| `paper` | nothing: Lost in the Middle's prompt, one user message | `Document [i](Title: t) text` lines |
| `langchain-stuff` | `create_stuff_documents_chain`, the LangChain docs' RAG prompt | texts joined by a blank line |
| `langchain-stuff-separated` | the same, with `document_separator="\\n\\n---\\n\\n"` | texts joined by a `---` line |
| `langchain-retrievalqa` | `RetrievalQA` (chain type `stuff`) with a chat model | texts joined by a blank line |
| `llamaindex` | a query engine's default chat text-QA prompt | `title: t`, a blank line, the text |
| `dspy` | `dspy.Predict("context, question -> answer")` through `ChatAdapter` | `[i] «text»` |

The templates are copied from each framework's source, named beside each: the frameworks are test-only
dependencies, never imported here. `tests/eval/tasks/test_prompt_shapes_match_frameworks.py` renders the same case
with each one and compares the messages. Each shape is the framework's single call: LlamaIndex would split a
context longer than the model's window into parts and refine its answer over them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from contextlift.eval.tasks.litm import Passage, qa_prompt
from contextlift.eval.tasks.registry import Option

PAPER = "paper"

# LangChain docs, "Build a Retrieval Augmented Generation (RAG) App", the system prompt handed to
# `create_stuff_documents_chain` (langchain_classic/chains/combine_documents/stuff.py); the human message is the
# question alone. langchain_classic/chains/conversational_retrieval/base.py carries a variant with "just say".
LANGCHAIN_RAG_SYSTEM = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer "
    "the question. If you don't know the answer, say that you don't know. Use three sentences maximum and keep the "
    "answer concise.\n\n{context}"
)
# langchain_classic/chains/question_answering/stuff_prompt.py: `system_template` of CHAT_PROMPT, which
# PROMPT_SELECTOR picks for a chat model; the human message is "{question}".
LANGCHAIN_RETRIEVALQA_SYSTEM = (
    "Use the following pieces of context to answer the user's question.\n"
    "If you don't know the answer, just say that you don't know, don't try to make up an answer.\n"
    "----------------\n{context}"
)
# langchain_classic/chains/combine_documents/base.py: DEFAULT_DOCUMENT_PROMPT ("{page_content}") and
# DEFAULT_DOCUMENT_SEPARATOR, the stuff chains' defaults.
LANGCHAIN_DOCUMENT_SEPARATOR = "\n\n"
LANGCHAIN_RULE_SEPARATOR = "\n\n---\n\n"
"""A `document_separator` an app passes so that chunks holding paragraphs stay apart (README, known limits)."""

# llama_index/core/prompts/chat_prompts.py: TEXT_QA_SYSTEM_PROMPT and the user message of CHAT_TEXT_QA_PROMPT.
LLAMAINDEX_SYSTEM = (
    "You are an expert Q&A system that is trusted around the world.\n"
    "Always answer the query using the provided context information, and not prior knowledge.\n"
    "Some rules to follow:\n"
    "1. Never directly reference the given context in your answer.\n"
    "2. Avoid statements like 'Based on the context, ...' or 'The context information ...' or anything along "
    "those lines."
)
LLAMAINDEX_USER = (
    "Context information is below.\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {query_str}\n"
    "Answer: "
)
# llama_index/core/schema.py: DEFAULT_METADATA_TMPL and DEFAULT_TEXT_NODE_TMPL, which `TextNode.get_content`
# fills (MetadataMode.LLM) and strips; llama_index/core/indices/prompt_helper.py, `PromptHelper.repack`, joins
# the nodes' contents with a blank line.
LLAMAINDEX_METADATA = "{key}: {value}"
LLAMAINDEX_NODE = "{metadata_str}\n\n{content}"
LLAMAINDEX_NODE_SEPARATOR = "\n\n"

# dspy/adapters/chat_adapter.py (ChatAdapter.format_field_description, format_field_structure,
# format_task_description, user_message_output_requirements) for the signature "context, question -> answer",
# `context` untyped as in DSPy's RAG tutorial and given a list of texts: typed `list[str]`, the list would be sent
# as a JSON array instead.
DSPY_SYSTEM = (
    "Your input fields are:\n"
    "1. `context` (str): \n"
    "2. `question` (str):\n"
    "Your output fields are:\n"
    "1. `answer` (str):\n"
    "All interactions will be structured in the following way, with the appropriate values filled in.\n\n"
    "[[ ## context ## ]]\n{context}\n\n"
    "[[ ## question ## ]]\n{question}\n\n"
    "[[ ## answer ## ]]\n{answer}\n\n"
    "[[ ## completed ## ]]\n"
    "In adhering to this structure, your objective is: \n"
    "        Given the fields `context`, `question`, produce the fields `answer`."
)
DSPY_USER = (
    "[[ ## context ## ]]\n{context}\n\n"
    "[[ ## question ## ]]\n{question}\n\n"
    "Respond with the corresponding output fields, starting with the field `[[ ## answer ## ]]`, and then ending "
    "with the marker for `[[ ## completed ## ]]`."
)


class Chat(NamedTuple):
    """The messages of one request: an optional system message, then the user's."""

    system: str | None
    user: str


Shape = Callable[[str, Sequence[Passage]], Chat]


def _paper(question: str, documents: Sequence[Passage]) -> Chat:
    return Chat(None, qa_prompt(question, documents))


def _langchain_stuff(question: str, documents: Sequence[Passage]) -> Chat:
    context = LANGCHAIN_DOCUMENT_SEPARATOR.join(d.text for d in documents)
    return Chat(LANGCHAIN_RAG_SYSTEM.format(context=context), question)


def _langchain_stuff_separated(question: str, documents: Sequence[Passage]) -> Chat:
    context = LANGCHAIN_RULE_SEPARATOR.join(d.text for d in documents)
    return Chat(LANGCHAIN_RAG_SYSTEM.format(context=context), question)


def _langchain_retrievalqa(question: str, documents: Sequence[Passage]) -> Chat:
    context = LANGCHAIN_DOCUMENT_SEPARATOR.join(d.text for d in documents)
    return Chat(LANGCHAIN_RETRIEVALQA_SYSTEM.format(context=context), question)


def _llamaindex(question: str, documents: Sequence[Passage]) -> Chat:
    nodes = (_llamaindex_node(d) for d in documents)
    user = LLAMAINDEX_USER.format(context_str=LLAMAINDEX_NODE_SEPARATOR.join(nodes), query_str=question)
    return Chat(LLAMAINDEX_SYSTEM, user)


def _llamaindex_node(document: Passage) -> str:
    """A `TextNode` with the title as its one metadata key, as `get_content(MetadataMode.LLM)` renders it."""
    metadata = LLAMAINDEX_METADATA.format(key="title", value=document.title).strip()
    return LLAMAINDEX_NODE.format(metadata_str=metadata, content=document.text).strip()


def _dspy(question: str, documents: Sequence[Passage]) -> Chat:
    return Chat(DSPY_SYSTEM, DSPY_USER.format(context=_dspy_list([d.text for d in documents]), question=question))


def _dspy_list(texts: Sequence[str]) -> str:
    """dspy/adapters/utils.py, `_format_input_list_field_value`: a list given to a `str` field."""
    if not texts:
        return "N/A"
    if len(texts) == 1:
        return _dspy_blob(texts[0])
    return "\n".join(f"[{i}] {_dspy_blob(text)}" for i, text in enumerate(texts, 1))


def _dspy_blob(text: str) -> str:
    """dspy/adapters/utils.py, `_format_blob`."""
    if "\n" not in text and "«" not in text and "»" not in text:
        return f"«{text}»"
    return "«««\n    " + text.replace("\n", "\n    ") + "\n»»»"


SHAPES: dict[str, Shape] = {
    PAPER: _paper,
    "langchain-stuff": _langchain_stuff,
    "langchain-stuff-separated": _langchain_stuff_separated,
    "langchain-retrievalqa": _langchain_retrievalqa,
    "llamaindex": _llamaindex,
    "dspy": _dspy,
}


def prompt_shape(name: str) -> Shape:
    """The renderer of shape `name`: the `prompt` option's value as a task reads it.

    Raises:
        ValueError: an unknown shape.
    """
    if name not in SHAPES:
        raise ValueError(f"unknown prompt shape; choose {', '.join(SHAPES)}")
    return SHAPES[name]


PROMPT = Option("prompt", PAPER, prompt_shape)
"""`--option TASK.prompt=SHAPE` of each task that renders its documents in an app's shape."""
