"""Detection fixtures produced by the frameworks themselves: each is the exact JSON body that a real framework,
with its own default templates and its own OpenAI client, sent to an OpenAI-compatible `/v1/chat/completions`.

Nothing here imitates a framework's prompt. A recording fake upstream is served on loopback; LangChain's
`ChatOpenAI`, LlamaIndex's `OpenAILike`, DSPy's `LM` (through LiteLLM) and the `openai` SDK are pointed at it and
their chains, query engines, chat engines and predictors are run; the body each one sent is the fixture. The shapes
an application writes itself (from "plain-context-question" to "retrieved-chunks", but for the two tool shapes,
which LangChain builds) are layouts applications commonly write by hand, sent by the real `openai` client.

The documents are real: Lost in the Middle's NQ-Open oracle file (`../shared/data/litm/nq-open-oracle.jsonl.gz`,
found by `tests/benchmark_data.py`; absent, the tests that use these fixtures are skipped).
Shape number `i` (0-based, in `SHAPE_NAMES` order) asks question line `i` and gets that line's gold passage in the
middle (index `RELEVANT`) of five documents; the other four are the gold passages of lines `100 + 4 * i` to
`103 + 4 * i`, in that order. The multi-turn shape's earlier exchange is line `EARLIER_EXCHANGE`'s question and
answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gzip
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.benchmark_data import LITM_ORACLE, data_file
from tests.fakes import completion
from tests.serving import fake_upstream_url, request_body

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever as LangChainRetriever
    from langchain_openai import ChatOpenAI
    from llama_index.core.retrievers import BaseRetriever as LlamaIndexRetriever
    from llama_index.core.schema import NodeWithScore
    from llama_index.llms.openai_like import OpenAILike

MODEL = "fake-model"
API_KEY = "sk-fake"
RELEVANT = 2
DISTRACTOR_BASE = 100
EARLIER_EXCHANGE = 99  # the line whose question and answer are the chat engine's earlier turn
# The fake upstream's one answer. It is in DSPy's ChatAdapter format, so that DSPy parses it and does not fall back
# to its JSON adapter (a second request); every other framework just takes it as text.
ANSWER = "[[ ## answer ## ]]\nA fake answer.\n\n[[ ## completed ## ]]"

# The distributions whose versions made the fixtures (for reports; `framework_versions()`).
FRAMEWORKS = (
    "openai",
    "langchain-core",
    "langchain-classic",
    "langchain-openai",
    "llama-index-core",
    "llama-index-llms-openai-like",
    "dspy",
    "litellm",
)

# LangChain's standard RAG answer prompt, as in the `create_retrieval_chain` example of
# langchain_classic/chains/conversational_retrieval/base.py (the LangChain RAG tutorial's wording).
LANGCHAIN_QA_SYSTEM_PROMPT = (
    "You are an assistant for question-answering tasks. Use "
    "the following pieces of retrieved context to answer the "
    "question. If you don't know the answer, just say that you "
    "don't know. Use three sentences maximum and keep the answer "
    "concise."
    "\n\n"
    "{context}"
)
# The LangChain docs' LCEL RAG template (the retrieval cookbook's), context in the human message, question after it.
LANGCHAIN_CONTEXT_FIRST_TEMPLATE = """Answer the question based only on the following context:
{context}

Question: {question}
"""
# The LangChain hub prompt "rlm/rag-prompt" (one human message; the question comes before the context).
RLM_RAG_PROMPT = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to answer the "
    "question. If you don't know the answer, just say that you don't know. Use three sentences maximum and keep the "
    "answer concise.\nQuestion: {question} \nContext: {context} \nAnswer:"
)
PER_DOCUMENT_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the user's question using only the documents that follow. "
    "If they do not contain the answer, say that you don't know."
)


@dataclass(frozen=True)
class FrameworkPrompt:
    """One fixture: the body a framework sent, and what was given to the framework to build it. The fixtures are
    built once per process and shared: copy `body` (`copy.deepcopy`) before changing it."""

    name: str
    body: dict[str, Any]
    documents: tuple[str, ...]  # the document texts as given to the framework, in order
    question: str
    relevant: int  # index of the gold document in `documents`
    message_role: str  # role of the message holding the documents; "tool"/"system" for one message per document


@dataclass(frozen=True)
class Passage:
    title: str
    text: str


@dataclass(frozen=True)
class Sample:
    """One question, its gold passage at `RELEVANT`, four other questions' gold passages around it."""

    question: str
    answer: str
    passages: tuple[Passage, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(p.text for p in self.passages)


class RecordingFakeUpstream:
    """A fake OpenAI-compatible upstream (ASGI): every POST to `.../chat/completions` is answered with
    `completion(ANSWER)` as plain JSON, and its raw request body is recorded in `bodies`."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        if scope["method"] == "POST" and scope["path"].endswith("/chat/completions"):
            self.bodies.append(body)
            status, payload = 200, completion(ANSWER)
        else:
            status, payload = 404, {"error": {"message": f"no route {scope['method']} {scope['path']}"}}
        data = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


# ---------------------------------------------------------------------------------------------------------------
# The documents


def _gold(row: dict[str, Any]) -> Passage:
    (gold,) = [c for c in row["ctxs"] if c.get("isgold")]
    return Passage(title=gold["title"], text=gold["text"])


@functools.cache
def _rows() -> tuple[dict[str, Any], ...]:
    with gzip.open(data_file(LITM_ORACLE), "rt", encoding="utf-8") as lines:
        return tuple(json.loads(line) for line in lines)


def sample(position: int) -> Sample:
    """The question and documents of the shape at `position` (see the module docstring)."""
    rows = _rows()
    question = rows[position]
    first = DISTRACTOR_BASE + 4 * position
    distractors = [_gold(rows[line]) for line in range(first, first + 4)]
    passages = (*distractors[:RELEVANT], _gold(question), *distractors[RELEVANT:])
    return Sample(question=question["question"], answer=question["answers"][0], passages=passages)


def _slug(title: str) -> str:
    return re.sub(r"\W+", "_", title.lower()).strip("_")


# ---------------------------------------------------------------------------------------------------------------
# Clients, pointed at the fake upstream


@contextlib.contextmanager
def _chat_openai(base_url: str) -> Iterator[ChatOpenAI]:
    """LangChain's `ChatOpenAI`, non-streaming, no retries; its HTTP client is closed when the block ends."""
    import openai
    from langchain_openai import ChatOpenAI

    with openai.DefaultHttpxClient() as http:
        yield ChatOpenAI(
            model=MODEL,
            base_url=base_url,
            api_key=API_KEY,  # type: ignore[arg-type]
            max_retries=0,
            timeout=20,
            streaming=False,
            http_client=http,
        )


@contextlib.contextmanager
def _openai_like(base_url: str) -> Iterator[OpenAILike]:
    """LlamaIndex's `OpenAILike` as a chat model, no retries; its HTTP client is closed when the block ends."""
    import openai
    from llama_index.llms.openai_like import OpenAILike

    with openai.DefaultHttpxClient() as http:
        yield OpenAILike(
            model=MODEL,
            api_base=base_url,
            api_key=API_KEY,
            is_chat_model=True,
            max_retries=0,
            timeout=20,
            http_client=http,
        )


def _send(base_url: str, messages: list[dict[str, Any]]) -> None:
    """An application's own prompt, sent with the `openai` SDK."""
    import openai

    with openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0, timeout=20) as client:
        client.chat.completions.create(model=MODEL, messages=messages, stream=False)  # type: ignore[arg-type]


def _langchain_documents(s: Sample) -> list[Document]:
    from langchain_core.documents import Document

    return [Document(page_content=p.text, metadata={"title": p.title}) for p in s.passages]


def _langchain_retriever(documents: list[Document]) -> LangChainRetriever:
    """A LangChain retriever that returns these documents, in this order, for any query."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document  # noqa: F401 - pydantic resolves the field's annotation by name
    from langchain_core.retrievers import BaseRetriever

    class FixedRetriever(BaseRetriever):
        documents: list[Document]

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return list(self.documents)

    return FixedRetriever(documents=documents)


def _llamaindex_nodes(s: Sample) -> list[NodeWithScore]:
    from llama_index.core.schema import NodeWithScore, TextNode

    return [
        NodeWithScore(node=TextNode(text=p.text, metadata={"title": p.title, "file_name": f"{_slug(p.title)}.txt"}))
        for p in s.passages
    ]


def _llamaindex_retriever(nodes: list[NodeWithScore]) -> LlamaIndexRetriever:
    """A LlamaIndex retriever that returns these nodes, in this order, for any query."""
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import QueryBundle

    class FixedRetriever(BaseRetriever):
        def __init__(self, fixed: list[NodeWithScore]) -> None:
            super().__init__()
            self._fixed = fixed

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(self._fixed)

    return FixedRetriever(nodes)


# ---------------------------------------------------------------------------------------------------------------
# The shapes: each runs one framework (or application) against the fake upstream at `base_url`.


def langchain_stuff_system(base_url: str, s: Sample) -> None:
    """`create_stuff_documents_chain` with LangChain's RAG system prompt; default document prompt and separator."""
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("system", LANGCHAIN_QA_SYSTEM_PROMPT), ("human", "{input}")])
    with _chat_openai(base_url) as llm:
        chain = create_stuff_documents_chain(llm, prompt)
        chain.invoke({"context": _langchain_documents(s), "input": s.question})


def langchain_stuff_user(base_url: str, s: Sample) -> None:
    """`create_stuff_documents_chain` with the docs' template: context in the human message, the question after."""
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_template(LANGCHAIN_CONTEXT_FIRST_TEMPLATE)
    with _chat_openai(base_url) as llm:
        chain = create_stuff_documents_chain(llm, prompt)
        chain.invoke({"context": _langchain_documents(s), "question": s.question})


def langchain_retrievalqa(base_url: str, s: Sample) -> None:
    """`RetrievalQA.from_chain_type(chain_type="stuff")`: its default chat prompt (`stuff_prompt.CHAT_PROMPT`)."""
    from langchain_classic.chains import RetrievalQA

    with _chat_openai(base_url) as llm:
        chain = RetrievalQA.from_chain_type(
            llm, chain_type="stuff", retriever=_langchain_retriever(_langchain_documents(s))
        )
        chain.invoke({"query": s.question})


def langchain_load_qa_stuff(base_url: str, s: Sample) -> None:
    """`load_qa_chain(chain_type="stuff")` with `input_documents` and `question`."""
    from langchain_classic.chains.question_answering import load_qa_chain

    with _chat_openai(base_url) as llm:
        chain = load_qa_chain(llm, chain_type="stuff")
        chain.invoke({"input_documents": _langchain_documents(s), "question": s.question})


def rag_prompt(base_url: str, s: Sample) -> None:
    """The hub prompt "rlm/rag-prompt" in the LangChain RAG tutorial's LCEL chain, with its `format_docs`."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(doc.page_content for doc in docs)

    prompt = ChatPromptTemplate.from_messages([("human", RLM_RAG_PROMPT)])
    retriever = _langchain_retriever(_langchain_documents(s))
    with _chat_openai(base_url) as llm:
        chain = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
        )
        chain.invoke(s.question)


def llamaindex_synthesizer(base_url: str, s: Sample) -> None:
    """`get_response_synthesizer` (default mode, compact) `.synthesize` over nodes with title/file_name metadata."""
    from llama_index.core import get_response_synthesizer

    with _openai_like(base_url) as llm:
        get_response_synthesizer(llm=llm).synthesize(s.question, nodes=_llamaindex_nodes(s))


def llamaindex_query_engine(base_url: str, s: Sample) -> None:
    """`RetrieverQueryEngine.from_args(retriever, llm)` `.query`."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    with _openai_like(base_url) as llm:
        RetrieverQueryEngine.from_args(_llamaindex_retriever(_llamaindex_nodes(s)), llm=llm).query(s.question)


def llamaindex_citation(base_url: str, s: Sample) -> None:
    """`CitationQueryEngine(retriever, llm)` `.query`: nodes become "Source N:" chunks under its citation template."""
    from llama_index.core.query_engine import CitationQueryEngine

    with _openai_like(base_url) as llm:
        CitationQueryEngine(retriever=_llamaindex_retriever(_llamaindex_nodes(s)), llm=llm).query(s.question)


def llamaindex_context_chat(base_url: str, s: Sample) -> None:
    """`ContextChatEngine.from_defaults(retriever, llm)` `.chat` after one earlier user/assistant exchange."""
    from llama_index.core.chat_engine import ContextChatEngine
    from llama_index.core.llms import ChatMessage

    earlier = _rows()[EARLIER_EXCHANGE]
    history = [
        ChatMessage(role="user", content=earlier["question"]),
        ChatMessage(role="assistant", content=earlier["answers"][0]),
    ]

    with _openai_like(base_url) as llm:
        engine = ContextChatEngine.from_defaults(retriever=_llamaindex_retriever(_llamaindex_nodes(s)), llm=llm)
        try:
            engine.chat(s.question, chat_history=history)
        finally:
            _close_default_memory(engine)


def _close_default_memory(engine: Any) -> None:
    """Dispose of the default chat memory's database engine on the loop that opened it: nothing else closes its
    aiosqlite connection, which warns when it is collected."""
    from llama_index.core.async_utils import asyncio_run

    store = getattr(getattr(engine, "_memory", None), "sql_store", None)
    database = getattr(store, "_async_engine", None)
    if database is not None:
        asyncio_run(database.dispose())


def _dspy_predict(base_url: str, s: Sample, signature: str) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else LiteLLM fetches its price list at import
    import dspy

    lm = dspy.LM(f"openai/{MODEL}", api_base=base_url, api_key=API_KEY, cache=False, num_retries=0)
    with dspy.context(lm=lm):
        dspy.Predict(signature)(context=list(s.texts), question=s.question)


def dspy_context(base_url: str, s: Sample) -> None:
    """DSPy `Predict("context, question -> answer")` with a list of passages, the RAG tutorial's form, through the
    default ChatAdapter: a list given to a `str` field is rendered "[1] «...»", one passage a line."""
    _dspy_predict(base_url, s, "context, question -> answer")


def dspy_context_list_str(base_url: str, s: Sample) -> None:
    """DSPy `Predict("context: list[str], question -> answer")` through the default ChatAdapter: a typed list is
    rendered as a JSON array."""
    _dspy_predict(base_url, s, "context: list[str], question -> answer")


def plain_context_question(base_url: str, s: Sample) -> None:
    context = "\n\n".join(s.texts)
    _send(base_url, [{"role": "user", "content": f"Context:\n{context}\n\nQuestion: {s.question}"}])


def system_per_document(base_url: str, s: Sample) -> None:
    documents = [{"role": "system", "content": f"Document: {p.title}\n{p.text}"} for p in s.passages]
    messages = [{"role": "system", "content": PER_DOCUMENT_SYSTEM_PROMPT}, *documents]
    _send(base_url, [*messages, {"role": "user", "content": s.question}])


def tool_per_document(base_url: str, s: Sample) -> None:
    """The agent pattern: the model asked for five documents at once; LangChain's tool made one `ToolMessage` each."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolCall
    from langchain_core.tools import tool

    by_title = {p.title: p.text for p in s.passages}

    @tool
    def fetch_document(title: str) -> str:
        """Fetch the text of the encyclopedia article with this title."""
        return by_title[title]

    calls = [
        ToolCall(name="fetch_document", args={"title": p.title}, id=f"call_{n}", type="tool_call")
        for n, p in enumerate(s.passages, 1)
    ]
    results = [fetch_document.invoke(call) for call in calls]
    with _chat_openai(base_url) as llm:
        llm.bind_tools([fetch_document]).invoke(
            [HumanMessage(s.question), AIMessage(content="", tool_calls=calls), *results]
        )


def tool_json_list(base_url: str, s: Sample) -> None:
    """A search tool returning a list of {url, title, content}; LangChain itself turns it into the ToolMessage."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolCall
    from langchain_core.tools import tool

    results = [
        {"url": f"https://en.wikipedia.org/wiki/{p.title.replace(' ', '_')}", "title": p.title, "content": p.text}
        for p in s.passages
    ]

    @tool
    def web_search(query: str) -> list[dict[str, str]]:
        """Search the web; returns the top results."""
        return results

    call = ToolCall(name="web_search", args={"query": s.question}, id="call_1", type="tool_call")
    message = web_search.invoke(call)
    with _chat_openai(base_url) as llm:
        llm.bind_tools([web_search]).invoke(
            [HumanMessage(s.question), AIMessage(content="", tool_calls=[call]), message]
        )


def markdown_source_sections(base_url: str, s: Sample) -> None:
    sections = "\n\n".join(f"### Source {n}\n{text}" for n, text in enumerate(s.texts, 1))
    _send(base_url, [{"role": "user", "content": f"{sections}\n\n{s.question}"}])


def bracket_citations(base_url: str, s: Sample) -> None:
    lines = "\n".join(f"[{n}] {p.title}: {p.text}" for n, p in enumerate(s.passages, 1))
    _send(base_url, [{"role": "user", "content": f"{lines}\n\n{s.question}"}])


def context_xml(base_url: str, s: Sample) -> None:
    context = "\n\n".join(s.texts)
    _send(base_url, [{"role": "user", "content": f"<context>\n{context}\n</context>\n\nQuestion: {s.question}"}])


def anthropic_documents(base_url: str, s: Sample) -> None:
    """Anthropic's long-context layout: each document with its index, source and content, the question after."""
    documents = "".join(
        f'<document index="{n}">\n<source>{p.title}</source>\n<document_content>{p.text}</document_content>\n'
        "</document>\n"
        for n, p in enumerate(s.passages, 1)
    )
    _send(base_url, [{"role": "user", "content": f"<documents>\n{documents}</documents>\n\n{s.question}"}])


def source_colon(base_url: str, s: Sample) -> None:
    sources = "\n\n".join(f"Source {n}:\n{text}" for n, text in enumerate(s.texts, 1))
    _send(base_url, [{"role": "user", "content": f"{sources}\n\nQuestion: {s.question}"}])


def retrieved_chunks(base_url: str, s: Sample) -> None:
    chunks = "\n".join(f"Retrieved chunk {n}: {text}" for n, text in enumerate(s.texts, 1))
    _send(base_url, [{"role": "user", "content": f"{chunks}\n\n{s.question}"}])


Builder = Callable[[str, Sample], None]

# name -> (role of the message holding the documents, builder). The order fixes each shape's sample.
SHAPES: dict[str, tuple[str, Builder]] = {
    "langchain-stuff-system": ("system", langchain_stuff_system),
    "langchain-stuff-user": ("user", langchain_stuff_user),
    "langchain-retrievalqa": ("system", langchain_retrievalqa),
    "langchain-load-qa-stuff": ("system", langchain_load_qa_stuff),
    "rag-prompt": ("user", rag_prompt),
    "llamaindex-synthesizer": ("user", llamaindex_synthesizer),
    "llamaindex-query-engine": ("user", llamaindex_query_engine),
    "llamaindex-citation": ("user", llamaindex_citation),
    "llamaindex-context-chat": ("system", llamaindex_context_chat),
    "dspy-context": ("user", dspy_context),
    "plain-context-question": ("user", plain_context_question),
    "system-per-document": ("system", system_per_document),
    "tool-per-document": ("tool", tool_per_document),
    "tool-json-list": ("tool", tool_json_list),
    "markdown-source-sections": ("user", markdown_source_sections),
    "bracket-citations": ("user", bracket_citations),
    "context-xml": ("user", context_xml),
    "anthropic-documents": ("user", anthropic_documents),
    "source-colon": ("user", source_colon),
    "retrieved-chunks": ("user", retrieved_chunks),
    "dspy-context-list-str": ("user", dspy_context_list_str),
}
SHAPE_NAMES = tuple(SHAPES)


def _on_own_event_loop(run: Callable[[], None]) -> None:
    """Run `run` in a worker thread whose current event loop is a fresh one, closed afterwards.

    LlamaIndex drives coroutines from its sync API (token estimates, the chat memory's database) with its
    `asyncio_run`, which uses the thread's current event loop and, in the main thread, creates one and leaves it set
    and open; collected later, in some other test, that loop warns. Here the loop is ours, and closed."""

    def hosted() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            run()
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as worker:
        worker.submit(hosted).result()


def _capture(upstream: RecordingFakeUpstream, base_url: str, name: str) -> FrameworkPrompt:
    role, build = SHAPES[name]
    s = sample(SHAPE_NAMES.index(name))
    upstream.bodies.clear()
    with warnings.catch_warnings():
        # The legacy chains (RetrievalQA, load_qa_chain) warn that they are deprecated; they are built on purpose.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        _on_own_event_loop(functools.partial(build, base_url, s))
    sent = len(upstream.bodies)
    assert sent == 1, f"{name}: the framework sent {sent} chat requests, expected one"
    return FrameworkPrompt(
        name=name,
        body=json.loads(upstream.bodies[-1]),
        documents=s.texts,
        question=s.question,
        relevant=RELEVANT,
        message_role=role,
    )


@functools.cache
def framework_prompts() -> list[FrameworkPrompt]:
    """Every shape, each built by its framework against one recording fake upstream (built once per process)."""
    _rows()  # the documents first: without the data file, skip before starting anything
    upstream = RecordingFakeUpstream()
    with fake_upstream_url(upstream) as base_url:
        return [_capture(upstream, base_url, name) for name in SHAPE_NAMES]


def framework_versions() -> dict[str, str]:
    """The installed version of each framework and client that made the fixtures."""
    versions: dict[str, str] = {}
    for name in FRAMEWORKS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


if __name__ == "__main__":  # pragma: no cover - a dump for looking at the fixtures
    import sys
    import time

    started = time.perf_counter()
    prompts = framework_prompts()
    elapsed = time.perf_counter() - started
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/framework_prompts_dump.json")
    out.write_text(json.dumps({p.name: p.body for p in prompts}, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(prompts)} shapes in {elapsed:.1f} s -> {out}; {framework_versions()}")
