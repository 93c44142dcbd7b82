"""GPT Researcher: the report step of a research run. For each sub-query (the planned ones, then the original query)
the context compressor writes the chunks it kept as `Source: ...` / `Title: ...` / `Content: ...` blocks, each ending
in a line break, joined by line breaks (so a blank line between two), and the sub-query's context is stripped; the
sub-queries' contexts are joined by one space, so the last block of one and the first of the next share a line. The
whole fills `Information: "{context}"` at the top of `generate_report_prompt`, the first block on the quote's line,
the query and the report's guidelines after it; or, when the user gives a custom prompt, follows it after
`Context: `. The agent's role prompt is the system message; `ChatOpenAI` streams the request.

Sources (assafelovic/gpt-researcher@5d84d2f5553e70a2765a8ff3a0d2672d60437ce8): `PromptFamily.generate_report_prompt`
(gpt_researcher/prompts.py; its f-string verbatim in templates/gpt_researcher_report_prompt.txt, its reference
prompts here) and `PromptFamily.pretty_print_docs`; the default agent's role prompt of `handle_json_error`
(gpt_researcher/actions/agent_creator.py); the join mirrors `ContextCompressor.async_get_context`
(gpt_researcher/context/compression.py), `SearchAPIRetriever` (gpt_researcher/context/retriever.py),
`LangChainDocumentLoader.load` (gpt_researcher/document/langchain_document.py), `ResearchConductor`'s
`_process_sub_query`, `_combine_mcp_and_web_context` and `_get_context_by_web_search`
(gpt_researcher/skills/researcher.py); the messages mirror `generate_report`
(gpt_researcher/actions/report_generation.py); the request is `ChatOpenAI`'s as `GenericLLMProvider.from_provider`
and `create_chat_completion` configure it (gpt_researcher/llm_provider/generic/base.py, gpt_researcher/utils/llm.py),
with the defaults of gpt_researcher/config/variables/default.py, sent by the installed `langchain-openai` to a
recording fake transport.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from tests.fakes import chunk as answer_chunk
from tests.fakes import sse_body
from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "GPT Researcher"
SOURCE = (
    "assafelovic/gpt-researcher@5d84d2f5553e70a2765a8ff3a0d2672d60437ce8: gpt_researcher/prompts.py "
    "PromptFamily.generate_report_prompt, PromptFamily.pretty_print_docs; gpt_researcher/actions/agent_creator.py "
    "handle_json_error; gpt_researcher/context/compression.py ContextCompressor.async_get_context; "
    "gpt_researcher/skills/researcher.py _get_context_by_web_search, _combine_mcp_and_web_context; "
    "gpt_researcher/actions/report_generation.py generate_report; gpt_researcher/utils/llm.py create_chat_completion"
)
DEFAULT_AGENT_ROLE = (
    "You are an AI critical thinker research assistant. Your sole purpose is to write well written, "
    "critically acclaimed, objective and structured reports on given text."
)
"""The role `choose_agent` falls back to (the role is otherwise the planning model's answer)."""
WEB_REFERENCE_PROMPT = (
    "\n"
    "You MUST write all used source urls at the end of the report as references, and make sure to not add duplicated "
    "sources, but only one reference for each.\n"
    "Every url should be hyperlinked: [url website](url)\n"
    "Additionally, you MUST include hyperlinks to the relevant URLs wherever they are referenced in the report:\n"
    "\n"
    "eg: Author, A. A. (Year, Month Date). Title of web page. Website Name. [url website](url)\n"
)
DOCUMENTS_REFERENCE_PROMPT = (
    "\n"
    "You MUST write all used source document names at the end of the report as references, and make sure to not add "
    'duplicated sources, but only one reference for each."\n'
)
"""Verbatim, the stray quote at its end included: the reference prompt of every source but the web."""
OBJECTIVE_TONE = "Objective (impartial and unbiased presentation of facts and findings)"
"""`Tone.Objective.value` (gpt_researcher/utils/enum.py), `GPTResearcher`'s default tone."""
TODAY = datetime.date(2026, 8, 20)
"""`date.today()`, which the prompt states, on a fixed day."""
# gpt_researcher/config/variables/default.py: REPORT_FORMAT, TOTAL_WORDS, LANGUAGE, SMART_TOKEN_LIMIT.
REPORT_FORMAT, TOTAL_WORDS, LANGUAGE, SMART_TOKEN_LIMIT = "APA", 1200, "english", 12000
REPORT_TEMPERATURE = 0.35
"""`generate_report`'s temperature, sent for a model outside `NO_SUPPORT_TEMPERATURE_MODELS`."""


def pretty_print_docs(docs: Sequence[tuple[str, str, str]], top_n: int | None = None) -> tuple[str, tuple[str, ...]]:
    """`PromptFamily.pretty_print_docs` over (source, title, content) triples: the context, and each block."""
    blocks = tuple(
        f"Source: {source}\nTitle: {title}\nContent: {content}\n"
        for i, (source, title, content) in enumerate(docs)
        if top_n is None or i < top_n
    )
    return "\n".join(blocks), blocks


def research_context(sub_query_docs: Sequence[Sequence[tuple[str, str, str]]]) -> tuple[str, tuple[str, ...]]:
    """The research context of `_get_context_by_web_search`: per sub-query, what `ContextCompressor` kept
    (`max_results=10`), stripped by `_combine_mcp_and_web_context` (no MCP retriever), the sub-queries' contexts
    joined by a space. Returns the context and each block as written."""
    contexts: list[str] = []
    units: list[str] = []
    for docs in sub_query_docs:
        context, blocks = pretty_print_docs(docs, 10)
        contexts.append(context.strip())
        units.extend(block.strip() for block in blocks)
    return " ".join(c for c in contexts if c), tuple(units)


def generate_report_prompt(question: str, context: str, reference_prompt: str) -> str:
    """`PromptFamily.generate_report_prompt` with the default config and tone."""
    return template("gpt_researcher_report_prompt.txt").format_map(
        {
            "context": context,
            "question": question,
            "total_words": TOTAL_WORDS,
            "report_format": REPORT_FORMAT,
            "reference_prompt": reference_prompt,
            "tone_prompt": f"Write the report in a {OBJECTIVE_TONE} tone.",
            "language": LANGUAGE,
            # The f-string's `{date.today()}`, read by `str.format` as the attribute `today()` of `date`.
            "date": SimpleNamespace(**{"today()": TODAY}),
        }
    )


def _sent_body(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The body `ChatOpenAI` streams, configured as `create_chat_completion` configures it for `generate_report`,
    recorded by a fake transport."""
    import httpx
    from langchain_openai import ChatOpenAI

    sent: list[dict[str, Any]] = []

    def fake_upstream(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        events = [answer_chunk("# A fake report"), answer_chunk(finish="stop")]
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse_body(events))

    async def stream_report() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(fake_upstream)) as http:
            llm = ChatOpenAI(
                model=MODEL,
                temperature=REPORT_TEMPERATURE,
                max_tokens=SMART_TOKEN_LIMIT,  # type: ignore[call-arg]
                stream_usage=True,
                base_url="http://fake-upstream/v1",
                api_key="sk-fake",  # type: ignore[arg-type]
                max_retries=0,
                http_async_client=http,
            )
            async for _ in llm.astream(messages):  # GenericLLMProvider.stream_response
                pass

    # On a thread of its own: the shapes are built from async tests too, where this thread's loop is running.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        worker.submit(asyncio.run, stream_report()).result()
    assert len(sent) == 1, f"ChatOpenAI made {len(sent)} calls"
    return sent[0]


def _langchain_documents(chunks: Sequence[Chunk]) -> list[tuple[str, str, str]]:
    """Documents handed over as LangChain documents: `LangChainDocumentLoader` makes the `title` metadata (the file
    name) the page's url and gives no title, so `SearchAPIRetriever` writes an empty one."""
    return [(c.file, "", c.text) for c in chunks]


def gpt_researcher() -> AppShape:
    minilm, dotprompt = picked("minilm", 2, 3, 8, 9), picked("dotprompt", 3, 4)
    question = "How do I install sentence-transformers and encode a list of sentences with all-MiniLM-L6-v2?"
    # Three planned sub-queries, then the original query: the chunks the compressor kept for each.
    per_sub_query = [
        [minilm[0], dotprompt[1]],
        [minilm[1]],
        [dotprompt[0], minilm[2]],
        [minilm[3]],
    ]
    context, units = research_context([_langchain_documents(chunks) for chunks in per_sub_query])
    prompt = generate_report_prompt(question, context, DOCUMENTS_REFERENCE_PROMPT)
    messages = [{"role": "system", "content": DEFAULT_AGENT_ROLE}, {"role": "user", "content": prompt}]
    return AppShape("gpt-researcher", APP, SOURCE, _sent_body(messages), units, question)


def gpt_researcher_custom_prompt() -> AppShape:
    graph_prompts = picked("graphqa", 6, 18, 15, 24)
    data_model = pydoc_chunks("langchain", 10, 2)
    prompts_url = (
        "https://github.com/langchain-ai/langchain-community/blob/main/libs/community/langchain_community/chains/"
        "graph_qa/prompts.py"
    )
    prompts_title = "langchain-community/libs/community/langchain_community/chains/graph_qa/prompts.py at main"
    data_model_url = "https://docs.python.org/3/reference/datamodel.html"
    data_model_title = "3. Data model — Python 3.13 documentation"
    # Web pages, scraped with their titles; the compressor's picks per sub-query, the original query last.
    per_sub_query = [
        [(prompts_url, prompts_title, graph_prompts[0].text), (prompts_url, prompts_title, graph_prompts[1].text)],
        [(data_model_url, data_model_title, data_model[0].text)],
        [(prompts_url, prompts_title, graph_prompts[2].text), (data_model_url, data_model_title, data_model[1].text)],
        [(prompts_url, prompts_title, graph_prompts[3].text)],
    ]
    context, units = research_context(per_sub_query)
    question = (
        "Which of these prompt templates gives the model a worked example about managers who own Neo4j stocks? "
        "Answer in 2 paragraphs max and name the template."
    )
    # `write_report(custom_prompt=...)`: the custom prompt replaces the report prompt, the context follows it.
    content = f"{question}\n\nContext: {context}"
    messages = [{"role": "system", "content": DEFAULT_AGENT_ROLE}, {"role": "user", "content": content}]
    return AppShape("gpt-researcher-custom-prompt", APP, SOURCE, _sent_body(messages), units, question)


SHAPES = (gpt_researcher, gpt_researcher_custom_prompt)
