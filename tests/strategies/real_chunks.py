"""Prompts that hold real retrieved chunks: text cut by LangChain's and LlamaIndex's own splitters, put into a chat
request by the frameworks' own chains and templates, for the tests that no chunk is ever split.

The text is real: SQuAD 2.0 dev articles (their paragraphs joined by blank lines, as the article reads) when the
data file is found (`tests/benchmark_data.py`), and always the reference pages Python ships (`pydoc_data.topics`:
prose with blank lines, indented grammar blocks and `****` title underlines). The splitters keep the blank lines
between paragraphs inside a chunk, as they do for every user.

Each prompt is built without a network: LangChain's `create_stuff_documents_chain` (and the legacy stuff chain's
default `CHAT_PROMPT`) run with a capturing runnable in the model's place, their messages turned into OpenAI's
shape by `langchain_core.messages.convert_to_openai_messages`; LlamaIndex's default text-QA template is filled with
its nodes' own `get_content(MetadataMode.LLM)` joined as its synthesizer joins them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.benchmark_data import SQUAD, data_file

QUESTION = "Which of these passages says when the work was finished?"
CHUNK_CHARACTERS = 700
"""LangChain's splitter at 700 characters: most chunks hold two or three paragraphs of these texts."""
CHUNK_TOKENS = 160
"""LlamaIndex's splitter at 160 tokens: about the same size."""
CHUNKS_PER_PROMPT = 6


@dataclass(frozen=True)
class ChunkPrompt:
    """One request: the body, and each chunk as its framework wrote it into the prompt (header and all)."""

    family: str
    source: str
    splitter: str
    body: dict[str, Any]
    written: tuple[str, ...]
    """Each document as the framework formatted it, in order (`Source: a\\n<chunk>`, `<doc>...</doc>`, ...)."""
    chunks: tuple[str, ...]
    """The splitter's chunks themselves."""


def pydoc_texts() -> list[str]:
    """The longest reference pages Python ships, as texts of many paragraphs."""
    import pydoc_data.topics

    pages = sorted(pydoc_data.topics.topics.values(), key=len, reverse=True)
    return [page for page in pages[:12] if page.count("\n\n") >= 8]


def squad_texts(articles: int = 6) -> list[str]:
    """SQuAD 2.0 dev articles, each its paragraphs joined by a blank line."""
    with data_file(SQUAD).open(encoding="utf-8") as handle:
        data = json.load(handle)["data"]
    return ["\n\n".join(p["context"] for p in article["paragraphs"]) for article in data[:articles]]


def langchain_chunks(texts: Sequence[str]) -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_CHARACTERS, chunk_overlap=0)
    return [chunk for text in texts for chunk in splitter.split_text(text)]


def llamaindex_chunks(texts: Sequence[str]) -> list[str]:
    import tiktoken
    from llama_index.core.node_parser import SentenceSplitter

    from contextlift.strategies.tokens import ENCODING

    # LlamaIndex's default tokenizer would download cl100k_base; the offline package ships the same encoding.
    encoding = tiktoken.get_encoding(ENCODING)
    splitter = SentenceSplitter(chunk_size=CHUNK_TOKENS, chunk_overlap=0, tokenizer=encoding.encode)
    return [chunk for text in texts for chunk in splitter.split_text(text)]


def multi_paragraph(chunks: Sequence[str], count: int = CHUNKS_PER_PROMPT) -> list[str]:
    """`count` chunks, those holding a blank line first (the case that was split wrongly), in their order."""
    held = [c for c in chunks if "\n\n" in c.strip()]
    rest = [c for c in chunks if c not in held]
    return (held + rest)[:count]


def _langchain_prompt(
    chunks: Sequence[str], *, separator: str | None, document_prompt: str | None, legacy: bool = False
) -> tuple[dict[str, Any], tuple[str, ...]]:
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.documents import Document
    from langchain_core.messages import convert_to_openai_messages
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate, format_document
    from langchain_core.runnables import RunnableLambda

    if legacy:
        from langchain_classic.chains.question_answering.stuff_prompt import CHAT_PROMPT as prompt
    else:
        prompt = ChatPromptTemplate.from_template("Answer the question based only on the following context:\n"
                                                  "{context}\n\nQuestion: {question}\n")  # fmt: skip
    documents = [Document(page_content=c, metadata={"source": f"chunk-{n}.txt"}) for n, c in enumerate(chunks, 1)]
    captured: list[Any] = []

    def model(value: Any) -> str:
        captured.append(value)
        return "A fake answer."

    options: dict[str, Any] = {}
    if separator is not None:
        options["document_separator"] = separator
    template = PromptTemplate.from_template(document_prompt or "{page_content}")
    if document_prompt is not None:
        options["document_prompt"] = template
    chain = create_stuff_documents_chain(RunnableLambda(model), prompt, **options)
    chain.invoke({"context": documents, "question": QUESTION})
    messages = convert_to_openai_messages(captured[0].to_messages())
    written = tuple(format_document(d, template) for d in documents)
    return {"model": "fake-model", "messages": messages}, written


def _llamaindex_prompt(chunks: Sequence[str], *, metadata: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
    from llama_index.core.schema import MetadataMode, TextNode

    nodes = [
        TextNode(text=c, metadata={"file_name": f"chunk-{n}.txt"} if metadata else {}) for n, c in enumerate(chunks, 1)
    ]
    written = tuple(node.get_content(metadata_mode=MetadataMode.LLM) for node in nodes)
    # The compact synthesizer joins node contents with "\n\n" (llama_index.core.response_synthesizers).
    prompt = DEFAULT_TEXT_QA_PROMPT.format(context_str="\n\n".join(written), query_str=QUESTION)
    return {"model": "fake-model", "messages": [{"role": "user", "content": prompt}]}, written


def _app_prompt(chunks: Sequence[str], *, numbered: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    written = tuple(f"[{n}] {c}" for n, c in enumerate(chunks, 1)) if numbered else tuple(chunks)
    context = "\n\n".join(written)
    content = f"Context:\n{context}\n\nQuestion: {QUESTION}"
    return {"model": "fake-model", "messages": [{"role": "user", "content": content}]}, written


Build = Callable[[Sequence[str]], tuple[dict[str, Any], tuple[str, ...]]]
FAMILIES: dict[str, Build] = {
    "langchain-default": functools.partial(_langchain_prompt, separator=None, document_prompt=None),
    "langchain-dashes": functools.partial(_langchain_prompt, separator="\n---\n", document_prompt=None),
    "langchain-dashes-spaced": functools.partial(_langchain_prompt, separator="\n\n---\n\n", document_prompt=None),
    "langchain-stars": functools.partial(_langchain_prompt, separator="\n***\n", document_prompt=None),
    "langchain-three-newlines": functools.partial(_langchain_prompt, separator="\n\n\n", document_prompt=None),
    "langchain-doc-wrapper": functools.partial(
        _langchain_prompt, separator=None, document_prompt="<doc>\n{page_content}\n</doc>"
    ),
    "langchain-source-header": functools.partial(
        _langchain_prompt, separator=None, document_prompt="Source: {source}\n{page_content}"
    ),
    "langchain-legacy-stuff": functools.partial(_langchain_prompt, separator=None, document_prompt=None, legacy=True),
    "langchain-legacy-dashes": functools.partial(
        _langchain_prompt, separator="\n\n---\n\n", document_prompt=None, legacy=True
    ),
    "llamaindex-metadata": functools.partial(_llamaindex_prompt, metadata=True),
    "llamaindex-plain": functools.partial(_llamaindex_prompt, metadata=False),
    "app-context-label": functools.partial(_app_prompt, numbered=False),
    "app-numbered": functools.partial(_app_prompt, numbered=True),
}
"""Each family: how the frameworks (or an app) join chunks into a prompt."""

DECLINED = frozenset({"langchain-default", "langchain-legacy-stuff", "llamaindex-plain", "app-context-label"})
"""Families whose chunks are told apart by blank lines alone: their requests are declined (`ambiguous-chunks`)."""


def chunk_prompt(family: str, source: str, splitter: str) -> ChunkPrompt:
    texts = squad_texts() if source == "squad" else pydoc_texts()
    cut = langchain_chunks if splitter == "langchain" else llamaindex_chunks
    chunks = multi_paragraph(_chunks_of(cut, tuple(texts)))
    body, written = FAMILIES[family](chunks)
    return ChunkPrompt(family, source, splitter, body, written, tuple(chunks))


@functools.cache
def _chunks_of(cut: Callable[[Sequence[str]], list[str]], texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(cut(texts))
