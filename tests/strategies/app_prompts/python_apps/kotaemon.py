"""Kotaemon: its simple QA reasoning pipeline. Each retrieved text chunk is flattened to one line (its line breaks
become spaces) and written `<br><b>Content from FILE: </b> ... \n<br>`, the chunks concatenated into the QA prompt's
`{context}`; the question follows in the same user turn, after the app's one-line system prompt.

Sources (Cinnamon/kotaemon@4015bb0f7cebd59d474624c4a570a4c119cdd826): `DEFAULT_QA_TEXT_PROMPT` of
libs/kotaemon/kotaemon/indices/qa/citation_qa.py and the default `system_prompt` setting of
libs/ktem/ktem/reasoning/simple.py, verbatim; the join mirrors `PrepareEvidencePipeline.run` (text chunks, no page
label; libs/kotaemon/kotaemon/indices/qa/format_context.py) and `AnswerWithContextPipeline.get_prompt` and `stream`
(citation_qa.py).
"""

from __future__ import annotations

from tests.strategies.app_prompts.corpus import picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape

APP = "Kotaemon"
SOURCE = (
    "Cinnamon/kotaemon@4015bb0f7cebd59d474624c4a570a4c119cdd826: libs/kotaemon/kotaemon/indices/qa/citation_qa.py "
    "DEFAULT_QA_TEXT_PROMPT, AnswerWithContextPipeline; libs/kotaemon/kotaemon/indices/qa/format_context.py "
    "PrepareEvidencePipeline; libs/ktem/ktem/reasoning/simple.py system_prompt"
)
DEFAULT_QA_TEXT_PROMPT = (
    "Use the following pieces of context to answer the question at the end in detail with clear explanation. "
    "If you don't know the answer, just say that you don't know, don't try to "
    "make up an answer. Give answer in "
    "{lang}.\n\n"
    "{context}\n"
    "Question: {question}\n"
    "Helpful Answer:"
)
SYSTEM_PROMPT = "This is a question answering system."


def kotaemon() -> AppShape:
    chunks = [*picked("minilm", 9, 4), *pydoc_chunks("llamaindex", 4, 2, file="datamodel.txt"), *picked("dotprompt", 9)]
    question = "What contrastive objective is used to fine-tune all-MiniLM-L6-v2?"
    units = []
    for chunk in chunks:
        content = chunk.text.replace("\n", " ")
        units.append(f"<br><b>Content from {chunk.file}: </b> " + content + " \n<br>")
    prompt = DEFAULT_QA_TEXT_PROMPT.format(context="".join(units), question=question, lang="English")
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    body = {"model": MODEL, "messages": messages, "stream": True}
    return AppShape("kotaemon", APP, SOURCE, body, tuple(units), question)


SHAPES = (kotaemon,)
