"""Each `prompt` shape sends exactly what the framework it copies sends for the same question and documents:
LangChain's `create_stuff_documents_chain` and `RetrievalQA`, a LlamaIndex response synthesizer and DSPy's
`ChatAdapter`, each run here for real (the test extra installs them; the eval never imports them) with a
recording model in place of an LLM, and compared message by message, role and content. The LangChain docs'
system prompt is the one string these tests cannot read from an installed framework: the chain is real, the
template is copied into both sides."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import dspy
import pytest
from dspy.adapters import ChatAdapter
from langchain_classic.chains import RetrievalQA
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from llama_index.core import get_response_synthesizer
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from pydantic import Field

from contextlift.eval.cases import Case, Grid
from contextlift.eval.metrics import best_subspan_em, dspy_field
from contextlift.eval.sources import Sources
from contextlift.eval.tasks import litm_qa
from contextlift.eval.tasks.litm import Passage
from contextlift.eval.tasks.prompt_shapes import LANGCHAIN_RAG_SYSTEM, SHAPES, prompt_shape


# A framework's synchronous API run here sets an event loop on the main thread and never closes it; once a later
# test's asyncio.run() has replaced it, the garbage collector warns about the unclosed loop and its self-pipe in
# whichever test is running then. Closed when this module is done, and the main thread left without a loop.
@pytest.fixture(autouse=True, scope="module")
def _frameworks_loop_closed() -> Iterator[None]:
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # none is set
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop_policy(None)


Messages = list[dict[str, str]]

AWKWARD = (
    "Who wrote the first {program}?",
    [
        Passage("Ada Lovelace", "Ada Lovelace wrote the first {program} for the Analytical Engine in 1843."),
        Passage("Quotes", 'Babbage called her «the Enchantress of Numbers» and "Lady Fairy".\nA second line.'),
        Passage("", "A document without a title, and braces: {} {0} {{context}}."),
    ],
)
"""Braces a template engine could read as fields, DSPy's own quote marks, a line break, an empty title."""


class RecordingChatModel(BaseChatModel):
    """A fake LangChain chat model: records the messages of each call and answers "ok"."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any) -> ChatResult:
        self.calls.append(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])

    @property
    def _llm_type(self) -> str:
        return "recording"


class FixedRetriever(BaseRetriever):
    """A fake LangChain retriever: the same documents, in order, for any query."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.documents


class RecordingLLM(CustomLLM):
    """A fake LlamaIndex chat model: records the messages of each call and answers "ok"."""

    calls: list[list[ChatMessage]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.calls.append(list(messages))
        return ChatResponse(message=ChatMessage(role="assistant", content="ok"))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("a chat model is sent messages, not a completion prompt")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        raise AssertionError("a chat model is sent messages, not a completion prompt")


def langchain_documents(documents: list[Passage]) -> list[Document]:
    return [Document(page_content=d.text, metadata={"title": d.title}) for d in documents]


def langchain_stuff(question: str, documents: list[Passage]) -> Messages:
    model = RecordingChatModel()
    prompt = ChatPromptTemplate.from_messages([("system", LANGCHAIN_RAG_SYSTEM), ("human", "{input}")])
    create_stuff_documents_chain(model, prompt).invoke({"context": langchain_documents(documents), "input": question})
    return _openai(model.calls)


def langchain_stuff_separated(question: str, documents: list[Passage]) -> Messages:
    model = RecordingChatModel()
    prompt = ChatPromptTemplate.from_messages([("system", LANGCHAIN_RAG_SYSTEM), ("human", "{input}")])
    chain = create_stuff_documents_chain(model, prompt, document_separator="\n\n---\n\n")
    chain.invoke({"context": langchain_documents(documents), "input": question})
    return _openai(model.calls)


def langchain_retrievalqa(question: str, documents: list[Passage]) -> Messages:
    model = RecordingChatModel()
    retriever = FixedRetriever(documents=langchain_documents(documents))
    RetrievalQA.from_chain_type(llm=model, chain_type="stuff", retriever=retriever).invoke({"query": question})
    return _openai(model.calls)


def llamaindex(question: str, documents: list[Passage]) -> Messages:
    llm = RecordingLLM()
    nodes = [NodeWithScore(node=TextNode(text=d.text, metadata={"title": d.title})) for d in documents]
    get_response_synthesizer(llm=llm).synthesize(question, nodes=nodes)
    (messages,) = llm.calls
    # The synthesizer's messages are the default chat text-QA prompt over each node's LLM view.
    context = "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes)
    assert messages == CHAT_TEXT_QA_PROMPT.format_messages(context_str=context, query_str=question)
    return [{"role": m.role.value, "content": str(m.content)} for m in messages]


def dspy_chat(question: str, documents: list[Passage]) -> Messages:
    signature = dspy.Signature("context, question -> answer")
    inputs = {"context": [d.text for d in documents], "question": question}
    return [{"role": m["role"], "content": m["content"]} for m in ChatAdapter().format(signature, [], inputs)]


FRAMEWORKS = {
    "langchain-stuff": langchain_stuff,
    "langchain-stuff-separated": langchain_stuff_separated,
    "langchain-retrievalqa": langchain_retrievalqa,
    "llamaindex": llamaindex,
    "dspy": dspy_chat,
}


def _openai(calls: list[list[BaseMessage]]) -> Messages:
    (messages,) = calls
    return [{"role": m["role"], "content": m["content"]} for m in convert_to_openai_messages(messages)]


def eval_cases(shape: str) -> list[tuple[str, list[Passage], Case]]:
    """The litm-qa cases the eval builds in `shape` (gold in the middle of 10 documents, and the oracle's one),
    each with the question and documents it was rendered from."""
    seen: list[tuple[str, list[Passage]]] = []
    render = SHAPES[shape]

    def recording(question: str, passages: Any) -> Any:
        seen.append((question, list(passages)))
        return render(question, passages)

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(SHAPES, shape, recording)
        cases, _ = litm_qa.build(Grid((10,), ("4",), 1, options={"prompt": shape}), Sources())
    shaped = [c for c in cases if c.variant != "closed-book"]
    return [(question, passages, case) for (question, passages), case in zip(seen, shaped, strict=True)]


def test_the_eval_imports_none_of_the_frameworks() -> None:
    frameworks = ("langchain", "llama_index", "dspy")
    code = (
        "import sys, contextlift.eval.command, contextlift.eval.plan; "
        f"assert not any(m.startswith({frameworks}) for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_shape_but_the_paper_has_a_framework_here() -> None:
    assert set(FRAMEWORKS) == set(SHAPES) - {"paper"}


@pytest.mark.parametrize("shape", list(FRAMEWORKS))
def test_the_eval_cases_are_what_the_framework_sends(shape: str) -> None:
    cases = eval_cases(shape)
    assert [(c.variant, len(passages)) for _, passages, c in cases] == [("standard", 10), ("hard", 10), ("oracle", 1)]
    for question, passages, case in cases:
        assert case.messages == FRAMEWORKS[shape](question, passages)


@pytest.mark.parametrize("shape", list(FRAMEWORKS))
def test_awkward_documents_are_rendered_as_the_framework_renders_them(shape: str) -> None:
    question, passages = AWKWARD
    chat = prompt_shape(shape)(question, passages)
    case = Case("t", "standard", 3, 0, 0, chat.user, ("Ada Lovelace",), "best_subspan_em", system=chat.system)
    assert case.messages == FRAMEWORKS[shape](question, passages)


@pytest.mark.parametrize(
    "reply",
    [
        "[[ ## answer ## ]]\nAda Lovelace\n\n[[ ## completed ## ]]",
        "[[ ## answer ## ]] Ada Lovelace, in 1843\nthe Enchantress\n[[ ## completed ## ]]",
        "Some thinking first.\n[[ ## answer ## ]]  \n\n Ada Lovelace \n",
        "[[ ## reasoning ## ]]\nnot Babbage\n\n[[ ## answer ## ]]\nAda Lovelace\n[[ ## answer ## ]]\nBabbage",
    ],
)
def test_a_dspy_reply_is_scored_on_the_answer_field_dspy_parses(reply: str) -> None:
    signature = dspy.Signature("context, question -> answer")
    assert dspy_field(reply, "answer") == ChatAdapter().parse(signature, reply)["answer"]
    assert best_subspan_em(reply, ["Ada Lovelace"]) == 1.0


def test_an_indented_answer_header_loses_none_of_the_answer() -> None:
    # DSPy cuts the line at the end of the header found in the *stripped* line, so two spaces of indent keep "]]".
    reply = "  [[ ## answer ## ]] Ada Lovelace"
    assert ChatAdapter().parse(dspy.Signature("context, question -> answer"), reply)["answer"] == "]] Ada Lovelace"
    assert dspy_field(reply, "answer") == "Ada Lovelace"


def test_a_reply_without_dspy_fields_is_scored_as_the_paper_scores_it() -> None:
    assert dspy_field("Ada Lovelace\nand more", "answer") == "Ada Lovelace\nand more"
    assert best_subspan_em("\nAda Lovelace", ["Ada Lovelace"]) == 0.0
    assert best_subspan_em("[[ ## reasoning ## ]]\nAda Lovelace", ["Ada Lovelace"]) == 0.0
