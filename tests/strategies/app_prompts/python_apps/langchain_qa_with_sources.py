"""LangChain's question answering with sources, `chain_type="stuff"`: `load_qa_with_sources_chain` called with the
documents, and `RetrievalQAWithSourcesChain` over a retriever. Both stuff every document into one `PromptTemplate`:
each written `Content: ...` / `Source: ...` (`EXAMPLE_PROMPT`, the source being the document's `source` metadata),
joined by blank lines, between two `=========` rules after `QUESTION: ...`, with `FINAL ANSWER:` after the closing
rule. The template's two worked examples before them hold `Content:` and `Source:` lines of their own. `ChatOpenAI`
sends the plain prompt as one user message.

Nothing is copied: the installed chains run. Sources (langchain-ai/langchain, the installed PyPI `langchain-classic`
and `langchain-openai`): `PROMPT` and `EXAMPLE_PROMPT` of
libs/langchain/langchain_classic/chains/qa_with_sources/stuff_prompt.py, `load_qa_with_sources_chain` and
`_load_stuff_chain` (qa_with_sources/loading.py), `StuffDocumentsChain._get_inputs` (combine_documents/stuff.py),
`RetrievalQAWithSourcesChain` (qa_with_sources/retrieval.py); the body is what `ChatOpenAI`
(libs/partners/openai/langchain_openai/chat_models/base.py) sent to a recording fake transport.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from tests.fakes import completion
from tests.strategies.app_prompts.corpus import Chunk, picked
from tests.strategies.app_prompts.shape import MODEL, AppShape

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_openai import ChatOpenAI

APP = "LangChain QA with sources"
SOURCE = (
    f"langchain-ai/langchain (PyPI langchain-classic {metadata.version('langchain-classic')}, langchain-openai "
    f"{metadata.version('langchain-openai')}): libs/langchain/langchain_classic/chains/qa_with_sources/stuff_prompt.py "
    "PROMPT, EXAMPLE_PROMPT; libs/langchain/langchain_classic/chains/qa_with_sources/loading.py "
    "load_qa_with_sources_chain, _load_stuff_chain; libs/langchain/langchain_classic/chains/combine_documents/stuff.py "
    "StuffDocumentsChain._get_inputs; libs/langchain/langchain_classic/chains/qa_with_sources/retrieval.py "
    "RetrievalQAWithSourcesChain; libs/partners/openai/langchain_openai/chat_models/base.py ChatOpenAI"
)
ANSWER = "A fake answer.\nSOURCES: all-MiniLM-L6-v2.md"
"""The fake upstream's answer, in the shape the chain splits into an answer and its sources."""


def _documents(chunks: Sequence[Chunk]) -> list[Document]:
    from langchain_core.documents import Document

    return [Document(page_content=c.text, metadata={"source": c.file}) for c in chunks]


def _sent_body(run: Callable[[ChatOpenAI], object]) -> dict[str, Any]:
    """The body `ChatOpenAI` sends when `run` calls a chain with it, recorded by a fake transport."""
    import httpx
    from langchain_openai import ChatOpenAI

    sent: list[dict[str, Any]] = []

    def fake_upstream(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=completion(ANSWER))

    with httpx.Client(transport=httpx.MockTransport(fake_upstream)) as http:
        llm = ChatOpenAI(
            model=MODEL,
            base_url="http://fake-upstream/v1",
            api_key="sk-fake",  # type: ignore[arg-type]
            max_retries=0,
            http_client=http,
        )
        run(llm)
    assert len(sent) == 1, f"the chain made {len(sent)} calls"
    return sent[0]


def _units(documents: Sequence[Document]) -> tuple[str, ...]:
    """Each document as the stuff chain writes it: its `document_prompt`, the default `EXAMPLE_PROMPT`."""
    from langchain_classic.chains.qa_with_sources.stuff_prompt import EXAMPLE_PROMPT
    from langchain_core.prompts import format_document

    return tuple(format_document(doc, EXAMPLE_PROMPT) for doc in documents)


def langchain_qa_with_sources() -> AppShape:
    from langchain_classic.chains.qa_with_sources import load_qa_with_sources_chain

    documents = _documents([*picked("minilm", 2, 3), *picked("dotprompt", 3, 4), *picked("minilm", 8)])
    question = "How do I install sentence-transformers and encode a list of sentences with all-MiniLM-L6-v2?"

    def run(llm: ChatOpenAI) -> None:
        with warnings.catch_warnings():
            # LangChain deprecates the chain (and sets its own filter for that warning when first imported): the
            # shape runs it on purpose, as the apps built on it still do.
            warnings.simplefilter("ignore")
            chain = load_qa_with_sources_chain(llm, chain_type="stuff")
        chain.invoke({"input_documents": documents, "question": question})

    body = _sent_body(run)
    return AppShape("langchain-qa-with-sources", APP, SOURCE, body, _units(documents), question)


def langchain_retrieval_qa_with_sources() -> AppShape:
    from langchain_classic.chains import RetrievalQAWithSourcesChain
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.retrievers import BaseRetriever

    documents = _documents([*picked("graphqa", 6, 18, 15), *picked("maskedarray", 9), *picked("graphqa", 24)])
    question = "Which prompt gives the model a worked example about managers who own Neo4j stocks?"

    class FixedRetriever(BaseRetriever):
        """Returns the same documents, in this order, for every query."""

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return documents

    def run(llm: ChatOpenAI) -> None:
        chain = RetrievalQAWithSourcesChain.from_chain_type(llm, chain_type="stuff", retriever=FixedRetriever())
        chain.invoke({"question": question})

    body = _sent_body(run)
    return AppShape("langchain-retrieval-qa-with-sources", APP, SOURCE, body, _units(documents), question)


SHAPES = (langchain_qa_with_sources, langchain_retrieval_qa_with_sources)
