"""`recite`: retrieve then solve (Du et al. 2025, sec. 5). Call 1 has the model copy the relevant evidence
word by word; call 2 answers from the original instructions and question with only that evidence in place of
the documents, turning a long-context task into a short one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio

from contextlift.strategies.builtin.prompts import RECITE_PROMPT
from contextlift.strategies.copied_text import CopiedTextIndex, content_words, lines_of
from contextlift.strategies.evidence import normalize
from contextlift.strategies.plugin import (
    ChatRequest,
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

# Matched against stripped lines. No two `\s*` can take the same spaces (which made a long run of them cost its
# square), and a document number has at most 9 digits (`int` refuses one past 4,300).
_NUMBERED_LINE = re.compile(
    r"^(?:[-*•#>]+\s*)?(?:\*\*)?(?:(?:document|doc|passage|source)\s*)?\[?#?(?P<number>\d{1,9})\]?"
    r"(?:\*\*)?\s*[:.)\-]?\s*(?P<text>.*)$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Recitation:
    """What a recitation gave: the evidence found, or why there is none."""

    evidence: list[Document]
    lines: int
    """Non-empty lines of the recitation other than `NONE`."""
    best_containment: float
    """The highest share of a line's content words found in one document: how close the best miss came."""

    @property
    def failure(self) -> str | None:
        """Why the recitation is unusable (`empty-recitation`, `unmatched-recitation`), or None."""
        if self.evidence:
            return None
        if not self.lines:
            return "empty-recitation"
        return f"unmatched-recitation; lines={self.lines}; best-containment={self.best_containment:.2f}"


def recited_evidence(recitation: str, request: ChatRequest) -> Recitation:
    """The documents' evidence the recitation copied, in the documents' order, each as the document's own text.

    Each line is located with `CopiedTextIndex`: the line's claimed document (`Document [3]: ...`, in whatever
    rendering) when it holds the line, else the document that holds most of it. A located line stands for the
    sentences of the document it covers; a line naming a document with no text of its own, for the whole
    document. A line found in no document was invented, and is dropped.
    """
    index = CopiedTextIndex(request)
    documents = index.documents
    whole: set[int] = set()
    sentences: dict[int, set[int]] = {}
    lines = 0
    best = 0.0
    for raw_line in lines_of(recitation):
        line = raw_line.strip()
        if not line or normalize(line) == "none":
            continue
        lines += 1
        match = _NUMBERED_LINE.match(line)
        claimed = int(match.group("number")) - index.numbering_base if match else -1
        names_a_document = 0 <= claimed < len(documents)
        if names_a_document and match is not None and not content_words(match.group("text")):
            whole.add(claimed)
            continue
        located = index.locate_all(line, claimed if names_a_document else None)
        if not located:
            best = max(best, index.best_containment(line))
        for found in located:
            if found.sentences:
                sentences.setdefault(found.document, set()).update(found.sentences)
            else:
                whole.add(found.document)
    evidence = []
    for position in sorted(whole | set(sentences)):
        if position in whole:
            evidence.append(documents[position].derived(documents[position].text))
        else:
            evidence.append(documents[position].derived(index.sentence_text(position, sorted(sentences[position]))))
    return Recitation(evidence, lines, best)


class Recite(Executor):
    """Two calls: recite the evidence, then answer from it alone."""

    name: ClassVar[str] = "recite"
    answers_n: ClassVar[bool] = False
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
        found = await anyio.to_thread.run_sync(recited_evidence, text, request)
        if found.failure is not None:
            context.fall_back(found.failure)
            return with_prior_usage(await send_once(request, context.upstream), [recitation])
        context.note(f"evidence={len(found.evidence)}")
        evidence_request = request.with_documents(found.evidence)
        return with_prior_usage(await send_once(evidence_request, context.upstream), [recitation])


def _recitation_body(request: ChatRequest, max_tokens: int) -> dict[str, Any]:
    prompt = RECITE_PROMPT.format(documents=request.documents_text(), question=request.question)
    return intermediate_body(request, prompt, max_tokens)
