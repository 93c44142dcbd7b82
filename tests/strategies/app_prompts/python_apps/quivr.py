"""Quivr (quivr-core): its LangGraph RAG answer step. `RAG_ANSWER_PROMPT` is a LangChain chat prompt (a system
message, the chat history, a second system message holding `{context}`, a human message with the task), but
`generate_rag` calls its `.format(...)`, which returns one string with `System:` and `Human:` prefixes, and invokes the
chat model with that string: the whole prompt reaches the API as a single user message. Each document is written
`Filename: ...` / `Source: n` before its text, the documents joined by blank lines, the first one on the line of the
context's label.

Sources (QuivrHQ/quivr@947a785415c6c35ab2ae8157222b4720b0710b4d): the templates of `RAG_ANSWER_PROMPT` and
`DEFAULT_DOCUMENT_PROMPT` in core/quivr_core/rag/prompts.py, verbatim; the join mirrors `combine_documents` and
`format_file_list` (core/quivr_core/rag/utils.py), `_build_rag_prompt_inputs` and `generate_rag`
(core/quivr_core/rag/quivr_rag_langgraph.py). The prompt is built and formatted by `langchain_core` itself.
"""

from __future__ import annotations

from tests.strategies.app_prompts.corpus import picked
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "Quivr"
SOURCE = (
    "QuivrHQ/quivr@947a785415c6c35ab2ae8157222b4720b0710b4d: core/quivr_core/rag/prompts.py RAG_ANSWER_PROMPT, "
    "DEFAULT_DOCUMENT_PROMPT; core/quivr_core/rag/utils.py combine_documents; "
    "core/quivr_core/rag/quivr_rag_langgraph.py generate_rag"
)
TODAY = "August 20, 2026"
"""`datetime.datetime.now().strftime("%B %d, %Y")`, as the module computes it at import, on a fixed day."""
SYSTEM_TEMPLATE = f"Your name is Quivr. You're a helpful assistant. Today's date is {TODAY}. " + (
    "- When answering use markdown. Use markdown code blocks for code snippets.\n"
    "- Answer in a concise and clear manner.\n"
    "- If no preferred language is provided, answer in the same language as the language used by the user.\n"
    "- You must use ONLY the provided context to complete the task. "
    "Do not use any prior knowledge or external information, even if you are certain of the answer.\n"
    "- Do not apologize when providing an answer.\n"
    "- Don't cite the source id in the answer objects, but you can use the source to complete the task.\n\n"
)
CONTEXT_TEMPLATE = (
    "\n"
    "- You have access to the following files to complete the task (limited to first 20 files): {files}\n"
    "- You have access to the following context to complete the task: {context}\n"
    "- Follow these user instruction when crafting the answer: {custom_instructions}\n"
    "- These user instructions shall take priority over any other previous instruction.\n"
)
ANSWER_TEMPLATE = (
    "Original task: {task}\n"
    "Rephrased and contextualized task: {rephrased_task}\n"
    "Remember, you shall complete ALL tasks.\n"
    "Remember: if you cannot provide an answer using ONLY the provided context and CITING the sources, "
    "just answer that you don't have the answer.\n"
    "If the provided context contains contradictory or conflicting information, state so providing the conflicting "
    "information.\n"
)
DOCUMENT_TEMPLATE = "Filename: {original_file_name}\nSource: {index} \n {page_content}"


def quivr() -> AppShape:
    from langchain_core.documents import Document
    from langchain_core.messages import HumanMessage, convert_to_openai_messages
    from langchain_core.prompts import (
        ChatPromptTemplate,
        HumanMessagePromptTemplate,
        MessagesPlaceholder,
        PromptTemplate,
        SystemMessagePromptTemplate,
        format_document,
    )

    chunks = [*picked("minilm", 2, 8), *picked("dotprompt", 3, 11), *picked("minilm", 9)]
    question = "How do I install sentence-transformers and encode a list of sentences with all-MiniLM-L6-v2?"
    prompt = ChatPromptTemplate.from_messages(
        [
            SystemMessagePromptTemplate.from_template(SYSTEM_TEMPLATE),
            MessagesPlaceholder(variable_name="chat_history"),
            SystemMessagePromptTemplate.from_template(CONTEXT_TEMPLATE),
            HumanMessagePromptTemplate.from_template(ANSWER_TEMPLATE),
        ]
    )
    document_prompt = PromptTemplate.from_template(template=DOCUMENT_TEMPLATE)
    docs = [Document(page_content=c.text, metadata={"original_file_name": c.file}) for c in chunks]
    for index, doc in enumerate(docs):  # combine_documents numbers the documents for citation
        doc.metadata["index"] = index
    written = [format_document(doc, document_prompt) for doc in docs]
    files = "\n".join(dict.fromkeys(c.file for c in chunks))  # format_file_list over the brain's files
    text = prompt.format(
        context="\n\n".join(written),
        task=question,
        rephrased_task=[question],  # the graph's task definitions: a list, formatted as Python writes it
        custom_instructions="None",
        files=files,
        chat_history=[],
    )
    messages = convert_to_openai_messages([HumanMessage(text)])
    body = {"model": MODEL, "messages": messages, "stream": False}
    return AppShape("quivr", APP, SOURCE, body, tuple(written), question)


SHAPES = (quivr,)
