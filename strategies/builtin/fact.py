"""`fact`: Find All Crucial Texts, iterative context rewriting (Wang et al., algorithm 1). Each round asks for
the sentences relevant to the question and removes those found from the context, so the next round can find
facts the first one overlooked; a final call answers from all facts found."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import anyio

from contextlift.strategies.builtin.prompts import FACT_RETRIEVAL_PROMPT
from contextlift.strategies.copied_text import CopiedTextIndex, lines_of
from contextlift.strategies.plugin import (
    ChatRequest,
    Completion,
    Document,
    Executor,
    Param,
    Params,
    StepContext,
    StrategyOutcome,
    answer_text,
    intermediate_body,
    send_once,
    with_prior_usage,
)

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def retrieved_sentences(text: str) -> list[str]:
    """The bulleted sentences of a retrieval answer (every non-empty line, if none is bulleted)."""
    lines = [line for line in lines_of(text) if line.strip()]
    bulleted = [line for line in lines if _BULLET.match(line)]
    chosen = bulleted or lines
    return [s for s in (_BULLET.sub("", line, count=1).strip() for line in chosen) if s and s != "-"]


class Fact(Executor):
    """Up to `rounds` retrieval calls, each on the context minus the facts already found, then one answer."""

    name: ClassVar[str] = "fact"
    answers_n: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (
        Param("rounds", int, 3, "most retrieval rounds", minimum=1, maximum=8),
        Param("max_tokens", int, 512, "token limit of each retrieval call", minimum=16, maximum=4096),
    )

    def max_upstream_calls(self, params: Params) -> int:
        return int(params["rounds"]) + 1

    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        remaining = _Remaining(list(request.documents))
        facts: list[Document] = []
        calls: list[Completion] = []
        # Rendering the documents and finding the retrieved sentences in them are CPU work in proportion to the
        # request: in a worker thread, not on the event loop.
        for _ in range(int(params["rounds"])):
            body = await anyio.to_thread.run_sync(remaining.retrieval_body, request, int(params["max_tokens"]))
            if body is None:
                break
            reply = await context.upstream.complete(body)
            calls.append(reply)
            found = await anyio.to_thread.run_sync(remaining.take_facts, answer_text(reply))
            facts.extend(found)
            if not found:
                break
        context.note(f"retrievals={len(calls)}; facts={len(facts)}")
        if not facts:
            context.fall_back(f"no-facts; best-containment={remaining.best_containment:.2f}" if calls else "no-facts")
            return with_prior_usage(await send_once(request, context.upstream), calls)
        return with_prior_usage(await send_once(request.with_documents(facts), context.upstream), calls)


class _Remaining:
    """The documents minus the facts found so far. A retrieved sentence is located with `CopiedTextIndex` and
    stands for the sentences of the document's own text it covers; those leave the context for the next
    round."""

    def __init__(self, documents: list[Document]) -> None:
        self.documents = documents
        self._index: CopiedTextIndex | None = None
        self.best_containment = 0.0

    def retrieval_body(self, request: ChatRequest, max_tokens: int) -> dict[str, Any] | None:
        """The next retrieval call's body; None when no document has text left."""
        if self._index is None:
            self._index = CopiedTextIndex(request, self.documents)
        shown = [d for d in self._index.remaining() if d.text.strip()]
        if not shown:
            return None
        documents = request.with_documents(shown).documents_text()
        prompt = FACT_RETRIEVAL_PROMPT.format(question=request.question, documents=documents)
        return intermediate_body(request, prompt, max_tokens)

    def take_facts(self, answer: str) -> list[Document]:
        """The new facts in a retrieval answer, each the document's own sentences, in the answer's order."""
        assert self._index is not None, "retrieval_body builds the index first"
        found = []
        for sentence in retrieved_sentences(answer):
            located = self._index.locate_all(sentence)
            if not located:
                self.best_containment = max(self.best_containment, self._index.best_containment(sentence))
            for piece in located:  # none: invented, not a fact
                new = self._index.take(piece.document, piece.sentences)
                if new:
                    found.append(self.documents[piece.document].derived(self._index.sentence_text(piece.document, new)))
        return found
