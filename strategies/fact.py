"""`fact`: Find All Crucial Texts, iterative context rewriting (Wang et al., algorithm 1). Each round asks for
the sentences relevant to the question and removes those found from the context, so the next round can find
facts the first one overlooked; a final call answers from all facts found."""

from __future__ import annotations

import re
from typing import ClassVar

from strategies.evidence import answer_text, intermediate_body, locate, normalize, remove_snippet, with_prior_usage
from strategies.pipeline import StepContext, StrategyOutcome, send_once
from strategies.prompts import FACT_RETRIEVAL_PROMPT
from strategies.registry import Executor, Param, Params
from strategies.request import ChatRequest, Document
from strategies.upstream import Completion

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def retrieved_sentences(text: str) -> list[str]:
    """The bulleted sentences of a retrieval answer (every non-empty line, if none is bulleted)."""
    lines = [line for line in text.splitlines() if line.strip()]
    bulleted = [line for line in lines if _BULLET.match(line)]
    chosen = bulleted or lines
    return [s for s in (_BULLET.sub("", line, count=1).strip() for line in chosen) if s and s != "-"]


class Fact(Executor):
    """Up to `rounds` retrieval calls, each on the context minus the facts already found, then one answer."""

    name: ClassVar[str] = "fact"
    params: ClassVar[tuple[Param, ...]] = (
        Param("rounds", int, 3, "most retrieval rounds", minimum=1, maximum=8),
        Param("max_tokens", int, 512, "token limit of each retrieval call", minimum=16, maximum=4096),
    )

    def max_upstream_calls(self, params: Params) -> int:
        return int(params["rounds"]) + 1

    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        remaining = list(request.documents)
        facts: list[Document] = []
        seen: set[str] = set()
        calls: list[Completion] = []
        for _ in range(int(params["rounds"])):
            context_docs = [d for d in remaining if d.text.strip()]
            if not context_docs:
                break
            shown = request.with_documents(context_docs)
            prompt = FACT_RETRIEVAL_PROMPT.format(question=request.question, documents=shown.documents_text())
            reply = await context.upstream.complete(intermediate_body(request, prompt, int(params["max_tokens"])))
            calls.append(reply)
            found = 0
            for sentence in retrieved_sentences(answer_text(reply)):
                index = locate(sentence, remaining)
                if index is None or normalize(sentence) in seen:
                    continue  # invented, or already found: not a new fact
                seen.add(normalize(sentence))
                facts.append(Document(text=sentence, title=remaining[index].title))
                remaining[index] = remove_snippet(remaining[index], sentence)
                found += 1
            if not found:
                break
        context.note(f"retrievals={len(calls)}; facts={len(facts)}")
        if not facts:
            context.fall_back("no-facts")
            return with_prior_usage(await send_once(request, context.upstream), calls)
        return with_prior_usage(await send_once(request.with_documents(facts), context.upstream), calls)
