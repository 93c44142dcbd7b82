"""QAnything (NetEase Youdao): one user turn holding `<SYSTEM>`, `<INSTRUCTIONS>` (which ask the question, twice)
and, last, `<DOCUMENTS>`. The chunks are grouped by file: each file's chunks, joined by line breaks, under one
`<reference>[n]` ... `</reference>`; the question is not at the end.

Sources (netease-youdao/QAnything@974f9337f9b9c56c12005b86fe9409dc86c9b520): `SYSTEM`, `INSTRUCTIONS` and
`PROMPT_TEMPLATE` of qanything_kernel/configs/model_config.py, verbatim in templates/qanything_*.txt; the join
mirrors `LocalDocQA.generate_prompt` and the template filling of `get_knowledge_based_answer`
(qanything_kernel/core/local_doc_qa.py) and `OpenAILLM.generatorAnswer`'s messages
(qanything_kernel/connector/llm/llm_for_openai_api.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "QAnything"
SOURCE = (
    "netease-youdao/QAnything@974f9337f9b9c56c12005b86fe9409dc86c9b520: qanything_kernel/configs/model_config.py "
    "SYSTEM, INSTRUCTIONS, PROMPT_TEMPLATE; qanything_kernel/core/local_doc_qa.py generate_prompt"
)
TODAY, NOW = "2026-08-20", "09:30:00"


def generate_prompt(query: str, chunks: Sequence[Chunk], prompt_template: str) -> tuple[str, tuple[str, ...]]:
    """`generate_prompt` (no `headers` metadata): the prompt, and each `<reference>` block as written. A chunk of a
    file already seen joins the block open at that moment, whichever file that block began with."""
    context = ""
    blocks: list[str] = []
    files: list[str] = []
    for chunk in chunks:
        content = re.sub(r"!\[figure]\(.*?\)", "", chunk.text)
        if chunk.file not in files:
            if files:
                context += "</reference>\n"
            files.append(chunk.file)
            context += f"<reference>[{len(files)}]" + "\n" + content + "\n"
            blocks.append(f"<reference>[{len(files)}]" + "\n" + content + "\n")
        else:
            context += content + "\n"
            blocks[-1] += content + "\n"
    context += "</reference>\n"
    prompt = prompt_template.replace("{{context}}", context).replace("{{question}}", query)
    return prompt, tuple(f"{block}</reference>" for block in blocks)


def qanything() -> AppShape:
    # The reranker's order: `prepare_source_documents` hands it on as it is, so the second model-card chunk, ranked
    # after a reference page, is written inside that page's block.
    minilm, reference = picked("minilm", 8, 9), pydoc_chunks("langchain", 8, 2, file="reference.txt")
    chunks = [minilm[0], reference[0], minilm[1], reference[1], *picked("dotprompt", 0)]
    question = "Is all-MiniLM-L6-v2 meant for encoding long documents?"
    system = template("qanything_system.txt").replace("{{today_date}}", TODAY).replace("{{current_time}}", NOW)
    prompt_template = template("qanything_prompt_template.txt").replace("{{system}}", system)
    prompt_template = prompt_template.replace("{{instructions}}", template("qanything_instructions.txt"))
    prompt, units = generate_prompt(question, chunks, prompt_template)
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "stream": True}
    return AppShape("qanything", APP, SOURCE, body, units, question)


SHAPES = (qanything,)
