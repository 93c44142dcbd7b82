"""`recite`: retrieve then solve (Du et al. 2025, sec. 5). Call 1 has the model copy the relevant evidence
word by word; call 2 answers from the original instructions and question with only that evidence in place of
the documents, turning a long-context task into a short one."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import anyio

from strategies.evidence import (
    answer_text,
    intermediate_body,
    locate_normalized,
    normalize,
    with_prior_usage,
)
from strategies.pipeline import StepContext, StrategyOutcome, send_once
from strategies.prompts import RECITE_PROMPT
from strategies.registry import Executor, Param, Params
from strategies.request import ChatRequest, Document

# Matched against stripped lines. No two `\s*` can take the same spaces (which made a long run of them cost its
# square), and a document number has at most 9 digits (`int` refuses one past 4,300).
_NUMBERED_LINE = re.compile(
    r"^(?:[-*•]\s*)?(?:(?:document|doc)\s*)?\[?(?P<number>\d{1,9})\]?\s*[:.)\-]\s*(?P<text>.*)$", re.IGNORECASE
)


def recited_evidence(recitation: str, request: ChatRequest) -> list[Document]:
    """The documents' evidence the recitation really copied, in the documents' order.

    A line naming a document (`Document [3]: ...`) counts when its text occurs in that document, or in
    another one; an unnumbered line counts when it occurs in some document. A numbered line with no text
    stands for the whole document. Text that occurs nowhere is dropped: it was not recited but invented.
    """
    documents = request.documents
    normalized = [normalize(d.text) for d in documents]
    base = request.block.numbering_base if request.block and request.block.numbering_base is not None else 1
    pieces: dict[int, list[str]] = {}
    for raw_line in recitation.splitlines():
        line = raw_line.strip()
        if not line or normalize(line) == "none":
            continue
        match = _NUMBERED_LINE.match(line)
        text = match.group("text").strip() if match else line
        claimed = int(match.group("number")) - base if match else -1
        names_a_document = 0 <= claimed < len(documents)
        if names_a_document and not normalize(text):
            pieces.setdefault(claimed, []).append(documents[claimed].text)
            continue
        if names_a_document and locate_normalized(text, [normalized[claimed]]) is not None:
            index: int | None = claimed
        else:
            index = locate_normalized(text, normalized)
        if index is not None:
            pieces.setdefault(index, []).append(text.strip(" \"'“”"))
    return [documents[i].derived(" ".join(dict.fromkeys(pieces[i]))) for i in sorted(pieces)]


class Recite(Executor):
    """Two calls: recite the evidence, then answer from it alone."""

    name: ClassVar[str] = "recite"
    params: ClassVar[tuple[Param, ...]] = (
        Param("max_tokens", int, 512, "token limit of the recitation call", minimum=16, maximum=4096),
    )

    def max_upstream_calls(self, params: Params) -> int:
        return 2

    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        # Rendering the documents and finding the recited lines in them are CPU work in proportion to the
        # request: in a worker thread, not on the event loop.
        body = await anyio.to_thread.run_sync(_recitation_body, request, int(params["max_tokens"]))
        recitation = await context.upstream.complete(body)
        text = answer_text(recitation)
        evidence = await anyio.to_thread.run_sync(recited_evidence, text, request)
        if not evidence:
            context.fall_back("empty-recitation" if normalize(text) in ("", "none") else "unmatched-recitation")
            return with_prior_usage(await send_once(request, context.upstream), [recitation])
        context.note(f"evidence={len(evidence)}")
        return with_prior_usage(await send_once(request.with_documents(evidence), context.upstream), [recitation])


def _recitation_body(request: ChatRequest, max_tokens: int) -> dict[str, Any]:
    prompt = RECITE_PROMPT.format(documents=request.documents_text(), question=request.question)
    return intermediate_body(request, prompt, max_tokens)
