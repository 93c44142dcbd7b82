"""Perplexica: the search agent's answer step. The researcher's findings become `<result index=n title=...>...</result>`
elements (the title unquoted, the text straight after the tag and its end tag straight after the text, the results
joined by one line break) inside a
`<search_results note="...">` element, followed by an empty `<widgets_result>` element; the whole fills `${context}` of
the writer prompt, inside `<context>` near the end of the system message, before the current date. The history turns
follow, then the question as the last user message, with nothing after it.

Findings that share a URL are merged into the first one's text, joined by a blank line: every chunk of one uploaded
file (`file_id://<id>`) becomes one result, its chunks in rank order.

Sources (ItzCrazyKns/Perplexica@d7b020e5bb6456e7510e54acf098aa1605818d90): the template literal of `getWriterPrompt`
(src/lib/prompts/search/writer.ts), verbatim in templates/perplexica_writer.txt and evaluated here as JavaScript
evaluates it. The rest mirrors `SearchAgent.searchAsync` (src/lib/agents/search/index.ts: the `<result>` lines, the
`<search_results>` and `<widgets_result>` wrapper, the message list), `Researcher.research` and `uploadsSearchAction`
(src/lib/agents/search/researcher/index.ts, researcher/actions/uploadsSearch.ts: the merge by URL), `UploadStore`
(src/lib/uploads/store.ts: a file's title is its name), `webSearchAction` (researcher/actions/webSearch.ts: a
result's title and content as SearxNG returns them), the chat route's defaults (src/app/api/chat/route.ts:
`systemInstructions || 'None'`; src/lib/hooks/useChat.tsx: mode `speed`, history pairs) and `OpenAILLM.streamText`
(src/lib/models/providers/openai/openaiLLM.ts: `temperature` 1.0, `stream: true`, unset options left out).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from tests.strategies.app_prompts.corpus import Chunk, picked, pydoc_chunks
from tests.strategies.app_prompts.shape import MODEL, AppShape
from tests.strategies.app_prompts.templates import template

APP = "Perplexica"
SOURCE = (
    "ItzCrazyKns/Perplexica@d7b020e5bb6456e7510e54acf098aa1605818d90: src/lib/prompts/search/writer.ts "
    "getWriterPrompt; src/lib/agents/search/index.ts SearchAgent.searchAsync; "
    "src/lib/agents/search/researcher/index.ts Researcher.research; "
    "src/lib/agents/search/researcher/actions/uploadsSearch.ts uploadsSearchAction; "
    "src/lib/models/providers/openai/openaiLLM.ts streamText"
)
NOW = "2026-08-20T09:30:00.000Z"
"""`new Date().toISOString()` at the moment the writer prompt is built, on a fixed day."""
SEARCH_RESULTS_OPEN = '<search_results note="These are the search results and assistant can cite these">'
WIDGETS_RESULT_OPEN = (
    '<widgets_result noteForAssistant="Its output is already showed to the user, assistant can use this information '
    'to answer the query but do not CITE this as a souce">'
)
EXPRESSION = re.compile(
    r"""\$\{(?:mode === 'quality' \? "(?P<line>[^"]*)" : ''"""
    r"""|(?P<name>context|systemInstructions|new Date\(\)\.toISOString\(\)))\}"""
)
"""The template's `${...}` expressions: the quality-mode line, and the three values."""


@dataclass(frozen=True)
class Finding:
    """One search result as the researcher returns it (`Chunk` of src/lib/types.ts)."""

    content: str
    title: str
    url: str


def writer_prompt(context: str, system_instructions: str, mode: str) -> str:
    """`getWriterPrompt`: the template literal with its escapes and `${...}` expressions evaluated, in one pass (a
    chunk's own `${...}` text stays as it is)."""
    values = {"context": context, "systemInstructions": system_instructions, "new Date().toISOString()": NOW}

    def evaluated(expression: re.Match[str]) -> str:
        if expression["line"] is not None:
            return expression["line"] if mode == "quality" else ""
        return values[expression["name"]]

    return EXPRESSION.sub(evaluated, template("perplexica_writer.txt").replace("\\`", "`"))


def merged_by_url(findings: Sequence[Finding]) -> list[Finding]:
    """The researcher's merge: a finding whose URL came before is appended to that one's content."""
    merged: dict[str, Finding] = {}
    for finding in findings:
        first = merged.get(finding.url)
        content = finding.content if first is None else f"{first.content}\n\n{finding.content}"
        merged[finding.url] = Finding(content, first.title if first else finding.title, finding.url)
    return list(merged.values())


def _shape(name: str, findings: Sequence[Finding], history: Sequence[dict[str, str]], question: str) -> AppShape:
    """`searchAsync` with no widget output: the results in the system prompt, the turns, then the question."""
    results = merged_by_url(findings)
    units = tuple(f"<result index={i + 1} title={f.title}>{f.content}</result>" for i, f in enumerate(results))
    context = (
        f"{SEARCH_RESULTS_OPEN}\n"
        + "\n".join(units)
        + f"\n</search_results>\n{WIDGETS_RESULT_OPEN}\n\n</widgets_result>"
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": writer_prompt(context, "None", "speed")},
        *history,
        {"role": "user", "content": question},
    ]
    body = {"model": MODEL, "messages": messages, "temperature": 1, "stream": True}
    return AppShape(name, APP, SOURCE, body, units, question)


def _upload(chunk: Chunk) -> tuple[str, str]:
    """An uploaded file's name and store URL: the file picker takes `.pdf, .docx, .txt`, so the file is a `.txt`
    copy; its id is `crypto.randomBytes(16).toString('hex')`, derived here from the name."""
    file_id = uuid.uuid5(uuid.NAMESPACE_URL, chunk.file).hex
    return f"{PurePosixPath(chunk.file).stem}.txt", f"file_id://{file_id}"


def perplexica() -> AppShape:
    """Questions about uploaded files (web search off): `uploads_search` ranks the chunks of three files; each file's
    chunks merge into one result."""
    ranked = [*picked("minilm", 2), *picked("graphqa", 6), *picked("minilm", 4), *picked("dotprompt", 3)]
    ranked += [*picked("graphqa", 2), *picked("dotprompt", 4)]
    findings = [Finding(chunk.text, *_upload(chunk)) for chunk in ranked]
    question = "How do I encode sentences with all-MiniLM-L6-v2, and how do the graph QA prompts phrase their examples?"
    return _shape("perplexica", findings, [], question)


def perplexica_web_follow_up() -> AppShape:
    """A second question in web mode: each SearxNG result its own `<result>` (page titles with spaces), after one
    earlier exchange."""
    pages = [
        (
            "numpy/numpy/ma/README.rst at main · numpy/numpy · GitHub",
            "https://github.com/numpy/numpy/blob/main/numpy/ma/README.rst",
        ),
        ("The numpy.ma module — NumPy v2.3 Manual", "https://numpy.org/doc/stable/reference/maskedarray.generic.html"),
        ("Subclassing ndarray — NumPy v2.3 Manual", "https://numpy.org/doc/stable/user/basics.subclassing.html"),
        ("3. Data model — Python 3.13.7 documentation", "https://docs.python.org/3/reference/datamodel.html"),
        ("Masked arrays — NumPy v2.3 Manual", "https://numpy.org/doc/stable/reference/maskedarray.html"),
    ]
    chunks = [*picked("maskedarray", 3, 5, 4), *pydoc_chunks("langchain", 2, 1), *picked("maskedarray", 6)]
    findings = [Finding(chunk.text, title, url) for chunk, (title, url) in zip(chunks, pages, strict=True)]
    history = [
        {"role": "user", "content": "What is a masked array in NumPy?"},
        {
            "role": "assistant",
            "content": "A masked array pairs an ndarray with a boolean mask that marks invalid entries[1]. "
            "Operations skip the masked entries[2].",
        },
    ]
    question = "Does MaskedArray keep the subclass of the data it wraps?"
    return _shape("perplexica-web-follow-up", findings, history, question)


SHAPES = (perplexica, perplexica_web_follow_up)
