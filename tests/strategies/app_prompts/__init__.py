"""The request bodies popular open-source RAG apps really send: one module per app (in `python_apps/` or
`javascript_apps/`, by the language of the app's own code), each building its chat-completions body the way the app
builds it (roles, message order, system or user placement, tool calls and results, reminders after the question)
around chunks real splitters cut from real text (`corpus`).

Nothing here is an imitation of an app's prompt. Each template is copied verbatim from the app's public source
(a string constant in the module, or a file under `templates/`), and the code that joins the chunks mirrors the
app's own function, named in the module's docstring with repository, path and commit (or release). Where the
framework is installed (LlamaIndex, LangChain, Jinja2, PyYAML), its own code runs.

| module | app | copied from (each module names every path and function) |
|---|---|---|
| `open_webui` | Open WebUI | PyPI `open-webui` 0.12.4 and 0.5.20: open_webui/config.py, utils/ |
| `ragflow` | RAGFlow | infiniflow/ragflow@b1b8cd62: rag/prompts/, api/ |
| `anythingllm` | AnythingLLM | Mintplex-Labs/anything-llm@72aabbd1: server/utils/, server/models/ |
| `dify` | Dify | langgenius/dify (four commits): api/core/prompt/, api/core/rag/retrieval/ |
| `onyx` | Onyx (Danswer) | onyx-dot-app/onyx@a7d66a8b: backend/onyx/prompts/, chat/, tools/ |
| `haystack` | Haystack | deepset-ai/haystack@c7cb46c0: PromptBuilder's docstring, e2e/pipelines/ |
| `llamaindex_chat` | LlamaIndex | the installed `llama-index-core`: its chat engines run |
| `quivr` | Quivr | QuivrHQ/quivr@947a7854: core/quivr_core/rag/ |
| `khoj` | Khoj | khoj-ai/khoj@ae229ca8: src/khoj/processor/conversation/, src/khoj/routers/ |
| `r2r` | R2R | SciPhi-AI/R2R@9c5a94d1: py/core/providers/database/prompts/, py/shared/utils/ |
| `kotaemon` | Kotaemon | Cinnamon/kotaemon@4015bb0f: libs/kotaemon/kotaemon/indices/qa/, libs/ktem/ |
| `verba` | Verba | weaviate/Verba@6fb7c98d: goldenverba/components/ |
| `qanything` | QAnything | netease-youdao/QAnything@974f9337: qanything_kernel/ |
| `flowise` | Flowise | FlowiseAI/Flowise@ababf4c8: packages/components/nodes/chains/ConversationalRetrievalQAChain/ |
| `lightrag` | LightRAG | HKUDS/LightRAG@207af40f: lightrag/prompt.py, lightrag/operate.py |
| `langchain_qa_with_sources` | LangChain | the installed `langchain-classic`: its qa_with_sources chains run |
| `gpt_researcher` | GPT Researcher | assafelovic/gpt-researcher@5d84d2f5: gpt_researcher/prompts.py, skills/ |
| `perplexica` | Perplexica | ItzCrazyKns/Perplexica@d7b020e5: src/lib/prompts/search/, src/lib/agents/search/ |
| `docsgpt` | DocsGPT | arc53/DocsGPT@52279d27: application/prompts/, application/agents/ |
| `maxkb` | MaxKB | 1Panel-dev/MaxKB@121614fb: apps/application/chat_pipeline/, ui/src/locales/ |
| `fastgpt` | FastGPT | labring/FastGPT@f59d70ba: packages/global/core/ai/prompt/, packages/service/core/workflow/ |
| `lobechat` | LobeChat | lobehub/lobe-chat (several commits): packages/prompts/src/knowledgeBaseQA/, src/store/chat/ |
| `cherry_studio` | Cherry Studio | CherryHQ/cherry-studio@6d314458: src/renderer/src/aiCore/, .../config/prompts.ts |
| `librechat` | LibreChat | danny-avila/LibreChat@8ca4cf3d: api/app/clients/prompts/, api/app/clients/tools/util/ |
| `langchain_chatchat` | Langchain-Chatchat | chatchat-space/Langchain-Chatchat@49165d6a, v0.2.10: server/chat/ |

`app_shapes()` builds every shape (deterministic, no network); `outcome` classifies what detection does with one
when its documents are moved (`scripts/app_shapes.py` prints the table). This package imports `strategies` and the
frameworks, never `proxy`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

from tests.strategies.app_prompts.javascript_apps import (
    anythingllm,
    cherry_studio,
    fastgpt,
    flowise,
    librechat,
    lobechat,
    perplexica,
)
from tests.strategies.app_prompts.outcome import OUTCOMES, Outcome, shape_outcome
from tests.strategies.app_prompts.python_apps import (
    dify,
    docsgpt,
    gpt_researcher,
    haystack,
    khoj,
    kotaemon,
    langchain_chatchat,
    langchain_qa_with_sources,
    lightrag,
    llamaindex_chat,
    maxkb,
    onyx,
    open_webui,
    qanything,
    quivr,
    r2r,
    ragflow,
    verba,
)
from tests.strategies.app_prompts.shape import AppShape

BUILDERS: tuple[Callable[[], AppShape], ...] = (
    *open_webui.SHAPES,
    *ragflow.SHAPES,
    *anythingllm.SHAPES,
    *dify.SHAPES,
    *onyx.SHAPES,
    *haystack.SHAPES,
    *llamaindex_chat.SHAPES,
    *quivr.SHAPES,
    *khoj.SHAPES,
    *r2r.SHAPES,
    *kotaemon.SHAPES,
    *verba.SHAPES,
    *qanything.SHAPES,
    *flowise.SHAPES,
    *lightrag.SHAPES,
    *langchain_qa_with_sources.SHAPES,
    *gpt_researcher.SHAPES,
    *perplexica.SHAPES,
    *docsgpt.SHAPES,
    *maxkb.SHAPES,
    *fastgpt.SHAPES,
    *lobechat.SHAPES,
    *cherry_studio.SHAPES,
    *librechat.SHAPES,
    *langchain_chatchat.SHAPES,
)


@functools.cache
def app_shapes() -> list[AppShape]:
    """Every shape, built once per process, in the order of the table above. Copy a body before changing it."""
    with warnings.catch_warnings():
        # LlamaIndex and LangChain warn about deprecations of their own on import; the shapes use them on purpose.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        shapes = [build() for build in BUILDERS]
    names = [shape.name for shape in shapes]
    assert len(set(names)) == len(names), f"shape names repeat: {names}"
    return shapes


__all__ = ["OUTCOMES", "AppShape", "Outcome", "app_shapes", "shape_outcome"]
