"""`excerpt`: the best passage(s) quoted verbatim in one block just before the question, every byte of the client's
context kept. `focus` names the document to read; this copies its words next to the question, where a model that
loses the middle of a long context still reads them, and adds only that: nothing moves, so an upstream's prefix
cache keeps everything before the block.

Where the block goes is where the shape says the question is:

- the question in the documents' own message, after them (`Question: ...`, LangChain's user prompt, the paper's
  format): in that message, at the start of the line that opens what follows the documents (the question's cue
  line, else the question's own line), after the blank line that ends the context;
- a later user turn (documents in a system message, tool results, a chat that went on): at the start of the last
  user message's text;
- the question asked before the documents, nothing after them: at the end of the documents' message.

The proxy's own words carry no document text: the block reads `Relevant excerpt (from document 3):`, then the
passage between fences of double quotes, longer than any run of double quotes the passage holds, so its text
cannot close the quotation. A document is named by its number only (the one the prompt shows it with, else its
position). The quoted text is bounded by `max_tokens` (cl100k): a longer passage is cut at a word boundary and
marked ` [...]`. Nothing moves, so it also runs where a context was read but could not be moved (`none:
ambiguous-chunks`), quoting the best paragraph. After `filter` it quotes the best of what was kept; put it after
steps that move documents, since it names them by the number they are sent with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import anyio

from contextlift.strategies.plugin import ChatRequest, Param, Params, StepContext, Tokenizer, Transform, rank
from contextlift.strategies.request import asking_turn, counted
from contextlift.strategies.spans import END_CUE, MAX_NUMBER_DIGITS, NUMBERED_MARKER, DocumentFormat

FRAMING = "Relevant excerpt (from document {number}):"
"""The line above each quotation: the proxy's words, with a number and nothing of the document's."""
UNNUMBERED_FRAMING = "Relevant excerpt:"
"""The line above a passage of a context whose boundaries are a guess: its position among guessed units is no
number the client gave it, and the framing names none."""
FENCE_QUOTE = '"'
MIN_FENCE = 3
ELISION = " [...]"
"""Where a passage was cut: the mark a quotation uses for words left out."""
DEFAULT_MAX_TOKENS = 300
"""About two paragraphs of the paper's 100-word passages: the answer's sentence and its neighbours, and little
enough that the block costs a small share of a retrieval prompt."""
MIN_CHARS_PER_TOKEN = 4
"""What a cl100k token of English holds on average: a passage is first read this many characters per token of
budget into, then twice as far, until what is read holds more than the budget."""
MAX_CHARS_PER_TOKEN = 16
"""Never more than this many characters per token of budget are read: a long document is not counted in full to
quote its opening. Four times English's average; text whose tokens are longer (runs of dots or dashes) is quoted
shorter than the budget allows."""
_STEPS_BACK = 8
_QUOTE_RUN = re.compile(f"{FENCE_QUOTE}+")
_WORD_END = re.compile(r"\s+")


class Excerpt(Transform):
    """Quotes the most relevant passage(s) verbatim in one block just before the question."""

    name: ClassVar[str] = "excerpt"
    ranks: ClassVar[bool] = True
    reads_unmovable: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        Param("top", int, 1, "how many of the most relevant documents are quoted", minimum=1, maximum=5),
        Param("max_tokens", int, DEFAULT_MAX_TOKENS, "the most tokens (cl100k) of quoted text, all quotations "
              "together; a longer passage is cut at a word boundary", minimum=16, maximum=4096),
    )  # fmt: skip
    # Its ranking stands behind the ranker's gate (`rankers.gate`), as every ranked step's does: where the ranker is
    # unsure, a quoted near miss misleads the model (on LangChain's default join with hard distractors, quoting
    # every time lost -0.127, 2/10 of 63 pairs, where lexical put a wrong passage first;
    # docs/results/reference-unmovable-langchain).

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        target = request if request.documents else request.unmovable
        if target is None or target.block is None:
            return request
        if not target.question:
            context.note("skipped=no-question")
            return request
        place = await place_of(target, context)
        if place is None:
            return request
        ranked = await rank(target, params, context)
        chosen = ranked.order()[: int(params["top"])]
        return await quote(request, target, place, chosen, int(params["max_tokens"]), context)


async def place_of(target: ChatRequest, context: StepContext) -> Place | None:
    """Where a block goes before `target`'s question; None where its message holds no text to put it beside (the
    step then says `skipped=format`)."""
    # Finding the question's place reads the text after the documents, which the client sizes: off the loop.
    place = await anyio.to_thread.run_sync(_place, target)
    if place is None:
        context.note("skipped=format")
    return place


async def quote(
    request: ChatRequest, target: ChatRequest, place: Place, chosen: list[int], max_tokens: int, context: StepContext
) -> ChatRequest:
    """`request` with `target`'s documents `chosen` (indices, best first) quoted verbatim in one block at `place`,
    before the question, `max_tokens` of quoted text at most; `target` is the request itself, or the reading of a
    context it may not move (`request.unmovable`)."""
    # A guessed reading's units were not numbered by the client: their positions would name the wrong chunk.
    numbered = target is request
    passages = [(i, _number(target, i) if numbered else None, target.documents[i].text.strip()) for i in chosen]
    # Counting tokens and copying the prompt are CPU work in proportion to them: not on the event loop.
    excerpted = await anyio.to_thread.run_sync(
        _excerpted, target, place, passages, max_tokens, context.services.tokenizer
    )
    if excerpted is None:
        context.note("skipped=empty")
        return request
    placed, quoted, added = excerpted
    context.note(f"quoted{counted(request, target)}=" + "+".join(str(i + 1) for i in quoted))
    context.note(f"tokens=+{added}")
    if target is request:
        return placed
    # Read but not movable: what goes on is the body with the block in it, and no documents at all; the units
    # stay readable, the block beside them, for a later step that only adds text (`focus`).
    body = await anyio.to_thread.run_sync(placed.render)
    return ChatRequest(body=body, question=request.question, detection=request.detection, unmovable=placed)


def quotation(number: int | None, text: str) -> str:
    """`text` quoted under the framing line, between fences it cannot close: one quote longer than its longest run."""
    runs = [len(run) for run in _QUOTE_RUN.findall(text)]
    fence = FENCE_QUOTE * max(MIN_FENCE, max(runs, default=0) + 1)
    framing = UNNUMBERED_FRAMING if number is None else FRAMING.format(number=number)
    return f"{framing}\n{fence}\n{text}\n{fence}"


def bounded(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """`text` within `budget` tokens: whole where it fits, else its longest opening that ends at a word boundary
    (else anywhere, for a first word longer than the budget) and fits with `ELISION` after it; "" where not even
    that fits."""
    # The opening read grows from about the budget's worth of English until it holds more than the budget: what
    # is cut from it is counted, never the rest of a long document.
    size = budget * MIN_CHARS_PER_TOKEN
    while True:
        window = text[:size]
        if tokenizer.count(window) > budget or size >= budget * MAX_CHARS_PER_TOKEN:
            break
        if len(window) == len(text):
            return text
        size *= 2
    word_ends = [m.start() for m in _WORD_END.finditer(window)]
    for ends in (word_ends, range(1, len(window))):
        cut = _longest_fit(window, ends, budget, tokenizer)
        if cut:
            return cut + ELISION
    return ""


def _longest_fit(window: str, ends: Sequence[int], budget: int, tokenizer: Tokenizer) -> str:
    def fits(end: int) -> bool:
        return tokenizer.count(window[:end].rstrip() + ELISION) <= budget

    # Prefix counts grow with the prefix nearly always (BPE can merge across the end): a binary search, then
    # checked, stepping back a few ends where a merge made the found one miss.
    low, high = 0, len(ends)
    while low < high:
        middle = (low + high) // 2
        if fits(ends[middle]):
            low = middle + 1
        else:
            high = middle
    for end in reversed(ends[max(0, low - _STEPS_BACK) : low]):
        if window[:end].strip() and fits(end):
            return window[:end].rstrip()
    return ""


def _excerpted(
    request: ChatRequest, place: Place, passages: list[tuple[int, int | None, str]], budget: int, tokenizer: Tokenizer
) -> tuple[ChatRequest, list[int], int] | None:
    """The request with the block at `place`, the indices of the documents quoted, and the tokens added; None
    where no passage had text to quote. The passages, best first, share the budget: each gets what the ones
    before it left."""
    quotations, quoted = [], []
    for index, number, text in passages:
        cut = bounded(text, budget, tokenizer) if text and budget > 0 else ""
        if cut:
            quotations.append(quotation(number, cut))
            quoted.append(index)
            budget -= tokenizer.count(cut)
    if not quoted:
        return None
    placed, added = _with_block(request, place, "\n\n".join(quotations))
    return placed, quoted, tokenizer.count(added)


def _number(request: ChatRequest, index: int) -> int:
    """The number the prompt shows the document with, else its position (1 for the first)."""
    assert request.block is not None
    base = request.block.numbering_base
    if base is not None:
        return base + index
    document = request.documents[index]
    shown = ""
    if document.number_span is not None:
        shown = document.raw[slice(*document.number_span)]
    elif request.block.format is DocumentFormat.NUMBERED:
        marker = NUMBERED_MARKER.match(document.raw)
        shown = (marker.group("bracketed") or marker.group("named")) if marker else ""
    if shown.isascii() and shown.isdigit() and len(shown) <= MAX_NUMBER_DIGITS:
        return int(shown)
    return index + 1


@dataclass(frozen=True, slots=True)
class Place:
    """Where the block goes: `at` characters into the documents' tail (`message` None), or into the text of one
    message, its content part `part` where the content is a list."""

    at: int
    message: int | None = None
    part: int | None = None


def _place(request: ChatRequest) -> Place | None:
    """Where the question is, as the shape says: a later user turn, else the documents' own message."""
    block = request.block
    assert block is not None
    messages = request.messages
    # The turn that asks, not a reminder the app sends after it (`asking_turn`).
    last_user = asking_turn(messages, max((i for i, m in enumerate(messages) if _role(m) == "user"), default=-1))
    last_document = block.message_indices[-1] if block.message_indices else block.message_index
    # Tool results answer the question asked before them, and a tool's own text is the tool's: the user's turn.
    in_tool = block.format is DocumentFormat.MESSAGES or _role(messages[block.message_index]) == "tool"
    if last_user > last_document or in_tool:
        return _opening(messages, last_user)
    if block.format is DocumentFormat.PARTS:
        content = messages[block.message_index]["content"]
        part = max(i for i, p in enumerate(content) if isinstance(p, Mapping) and p.get("type") == "text")
        return Place(_question_line(content[part]["text"], request.question) or 0, block.message_index, part)
    at = _question_line(block.tail, request.question)
    return Place(len(block.tail) if at is None else at)


def _question_line(text: str, question: str) -> int | None:
    """Where the line that opens what follows the documents starts: a cue line (`Question:`, `Answer:`, a
    `## Question` heading) or the question's own line, whichever comes first; None where `text` holds neither."""
    starts = []
    cue = END_CUE.search(text)
    if cue is not None:
        starts.append(text.rfind("\n", 0, cue.start()) + 1)
    found = text.find(question) if question else -1
    if found >= 0:
        starts.append(text.rfind("\n", 0, found) + 1)
    return min(starts, default=None)


def _with_block(request: ChatRequest, place: Place, block: str) -> tuple[ChatRequest, str]:
    """The request with the block at `place`, and the text added (the block with the line breaks around it)."""
    if place.message is None:
        assert request.block is not None
        tail = request.block.tail
        added = _spaced(tail[: place.at], tail[place.at :], block, opens_text=False)
        return request.with_block_text(tail=f"{tail[: place.at]}{added}{tail[place.at :]}"), added
    messages = [dict(m) for m in request.messages]
    message = messages[place.message]
    if place.part is None:
        text = message["content"]
        added = _spaced(text[: place.at], text[place.at :], block, opens_text=True)
        message["content"] = f"{text[: place.at]}{added}{text[place.at :]}"
    else:
        parts = [dict(p) for p in message["content"]]
        text = parts[place.part]["text"]
        added = _spaced(text[: place.at], text[place.at :], block, opens_text=True)
        parts[place.part]["text"] = f"{text[: place.at]}{added}{text[place.at :]}"
        message["content"] = parts
    return replace(request, body={**request.body, "messages": messages}), added


def _spaced(before: str, after: str, block: str, *, opens_text: bool) -> str:
    """The block set off by a blank line from the text on either side of it."""
    newlines = len(before) - len(before.rstrip("\n"))
    lead = "" if not before and opens_text else "\n" * max(0, 2 - newlines)
    trail = "\n\n" if after else ""
    return f"{lead}{block}{trail}"


def _opening(messages: list[Mapping[str, Any]], index: int) -> Place | None:
    """The start of the text of message `index` (its first text part's, for a list); None where it has none."""
    content = messages[index].get("content") if index >= 0 else None
    if isinstance(content, str) and content:
        return Place(0, index)
    if isinstance(content, list):
        for i, part in enumerate(content):
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                return Place(0, index, i)
    return None


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None
