"""R2R: its RAG endpoint. The search results are lines under `Vector Search Results:`, each chunk after a
`Source ID [xxxxxxx]:` line holding the first seven characters of its id; they fill `{context}` of the `rag` task
prompt, a user turn that asks the question before the context and again after it, then a reminder; a one-line system
prompt comes first.

Sources (SciPhi-AI/R2R@9c5a94d151f90876bd7eb860f300a8fd662dc481): the `rag` prompt of
py/core/providers/database/prompts/rag.yaml (verbatim in templates/r2r_rag.yaml, read by PyYAML as R2R reads it) and
the `system` prompt of system.yaml; the join mirrors `format_search_results_for_llm` and `id_to_shorthand`
(py/shared/utils/base_utils.py), `RetrievalService.rag` and `PromptsHandler.get_message_payload`
(py/core/main/services/retrieval_service.py, py/core/providers/database/prompts_handler.py).
"""

from __future__ import annotations

import uuid

from tests.strategies.app_prompts.corpus import picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "R2R"
SOURCE = (
    "SciPhi-AI/R2R@9c5a94d151f90876bd7eb860f300a8fd662dc481: py/core/providers/database/prompts/rag.yaml, "
    "system.yaml; py/shared/utils/base_utils.py format_search_results_for_llm; "
    "py/core/providers/database/prompts_handler.py get_message_payload"
)
SYSTEM = "You are a helpful agent."


def r2r() -> AppShape:
    import yaml

    chunks = [*pydoc_chunks("langchain", 5, 3), *picked("maskedarray", 7, 12)]
    question = "What happens to the exception when a finally clause executes a return statement?"
    lines = ["Vector Search Results:"]
    units = []
    for chunk in chunks:
        # R2R's chunk ids are UUIDs; derived from the text so the fixture is the same on every run.
        short = str(uuid.uuid5(uuid.NAMESPACE_URL, chunk.text))[:7]
        lines.extend((f"Source ID [{short}]:", chunk.text))
        units.append(f"Source ID [{short}]:\n{chunk.text}")
    context = "\n".join(lines)
    task = yaml.safe_load(template("r2r_rag.yaml"))["rag"]["template"].format(query=question, context=context)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    body = {"model": MODEL, "messages": messages, "stream": False}
    return AppShape("r2r", APP, SOURCE, body, tuple(units), question)


SHAPES = (r2r,)
