"""`chain`: Chain of Agents (Zhang et al., NeurIPS 2024). The documents are cut into chunks that fit a token
budget; worker calls read them one after the other, each with the question and the summary the worker before it
wrote (the paper's communication unit), and write the summary anew. A last call, the manager, answers the
client's own request with the last summary in place of the documents. No call reads more than one chunk, so
documents longer than the model's window are read whole."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any, ClassVar

import anyio

from contextlift.strategies.builtin.prompts import CHAIN_MANAGER_PROMPT, CHAIN_WORKER_PROMPT
from contextlift.strategies.plugin import (
    ChatRequest,
    Completion,
    Document,
    Executor,
    Param,
    Params,
    StepContext,
    StrategyOutcome,
    Tokenizer,
    answer_text,
    intermediate_body,
    send_once,
    with_prior_usage,
)

# Where a document over the budget may be cut: after a sentence's end (closing quotes or brackets included) and
# the spaces after it, or after a line break; else after a word and its spaces. Each pattern scans a run of
# characters once: the classes it repeats cannot take the character that must follow them.
_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d\u2019]*\s+|\n\s*")
_WORD_END = re.compile(r"\S+\s*")
# A text longer than this many characters is counted a window of this length at a time, and only until the count
# passes the budget: tiktoken counts one 8 MB run without whitespace in 5.7 s (0.7 µs a character, against 0.1 to
# 0.2 µs in windows), and chunking such a document counted it whole four times (27 s of CPU). 65,536 characters
# are about 16,000 tokens of English, four default chunks: a document or a sentence under it is counted exactly, as
# before; one over it as the sum of its windows, a token more or less where a window's edge cuts one.
_COUNT_WINDOW = 65_536


@dataclass(frozen=True, slots=True)
class Chunk:
    """The documents one worker reads."""

    start: int
    """Position in the request of the first of them: they keep the numbers they have there."""
    documents: tuple[Document, ...]


class Chain(Executor):
    """Workers summarize the chunks in order, each from the one before; a manager answers from the summary."""

    name: ClassVar[str] = "chain"
    answers_n: ClassVar[bool] = False
    # chunk_tokens: 4096 (cl100k) is half the window of the embedded SmolLM2-135M (local_model_context, 8192 of its
    # own tokens, which count English up to ~15% above cl100k: ~4,700). A worker also reads the previous summary
    # and writes the next one (max_tokens each) after the prompt: 8192 - 4,700 - 2 x 512 - ~100 leaves ~2,300 for
    # the instructions and the question. Shorter chunks are the paper's point: each worker reads a short context.
    # max_chunks: at most 25, since 25 workers, the manager and the default retry_budget (4) make the default
    # max_upstream_calls (30); a selection that could exceed it is refused before any call.
    params: ClassVar[tuple[Param, ...]] = (
        Param("chunk_tokens", int, 4096, "tokens of documents each worker reads", minimum=64, maximum=1_000_000),
        Param("max_chunks", int, 16, "most worker calls; documents that need more get one plain call instead",
              minimum=1, maximum=25),
        Param("max_tokens", int, 512, "token limit of each worker's summary", minimum=16, maximum=4096),
    )  # fmt: skip

    def max_upstream_calls(self, params: Params) -> int:
        return int(params["max_chunks"]) + 1

    def upstream_calls(self, params: Params, prompt_tokens: int) -> int:
        # A worker per chunk and the manager; past max_chunks, one plain call. The prompt's tokens stand for the
        # documents': an estimate, where max_upstream_calls is the bound.
        chunks = max(1, math.ceil(prompt_tokens / int(params["chunk_tokens"])))
        return chunks + 1 if chunks <= int(params["max_chunks"]) else 1

    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        # Counting the documents' tokens and rendering each chunk are CPU work in proportion to the request: in a
        # worker thread, not on the event loop.
        tokenizer = context.services.tokenizer
        most = int(params["max_chunks"])
        # Cutting stops two chunks past the cap: one past it is refused with its exact count in the note, more than
        # that are not cut (nor counted) to the end, which an 8 MB document would make cost seconds.
        chunks = await anyio.to_thread.run_sync(
            chunk_documents, request, int(params["chunk_tokens"]), tokenizer, most + 2
        )
        context.note(f"chunks={len(chunks)}" if len(chunks) <= most + 1 else f"chunks>{most + 1}")
        if len(chunks) > most:
            # Dropping the chunks past the cap would answer from part of the documents without saying so.
            context.fall_back("too-many-chunks")
            return await send_once(request, context.upstream)
        notes = ""
        calls: list[Completion] = []
        empty = 0
        for chunk in chunks:
            body = await anyio.to_thread.run_sync(_worker_body, request, chunk, notes, int(params["max_tokens"]))
            calls.append(await context.upstream.complete(body))
            written = answer_text(calls[-1]).strip()
            if not written:
                # Passing on nothing would lose what the workers before found: the last summary written goes on.
                empty += 1
            notes = written or notes
        if empty:
            context.note(f"empty={empty}")
        if not notes:
            context.fall_back("empty-notes")
            return with_prior_usage(await send_once(request, context.upstream), calls)
        return with_prior_usage(await send_once(_manager_request(request, notes), context.upstream), calls)


def chunk_documents(request: ChatRequest, budget: int, tokenizer: Tokenizer, limit: int | None = None) -> list[Chunk]:
    """The request's documents in chunks of at most `budget` tokens each, in the request's order; the first
    `limit` of them only, where a limit is given (the rest are neither cut nor counted).

    A document counts as the worker sees it, with its number and title. Whole documents are grouped while they
    fit; one over the budget alone is cut by `split_text` into pieces, each a chunk of its own.
    """
    return list(islice(_chunks(request, budget, tokenizer.count), limit))


def _chunks(request: ChatRequest, budget: int, count: Callable[[str], int]) -> Iterator[Chunk]:
    group: list[Document] = []
    start = held = 0
    for index, document in enumerate(request.documents):
        shown = _excerpt(request, index, [document]).documents_text()
        tokens = _count_upto(shown, budget, count)
        if group and held + tokens > budget:
            yield Chunk(start, tuple(group))
            group, held = [], 0
        if tokens > budget:
            # The number and title are shown with every piece: their tokens come off each piece's budget. A long
            # document's are those of the same document with no text, as the pieces are shown (not counted whole).
            if len(shown) <= _COUNT_WINDOW:
                overhead = max(0, tokens - count(document.text))
            else:
                overhead = count(_excerpt(request, index, [document.derived("")]).documents_text())
            for piece in _pieces(document.text, max(1, budget - overhead), count):
                yield Chunk(index, (document.derived(piece),))
            continue
        if not group:
            start = index
        group.append(document)
        held += tokens
    if group:
        yield Chunk(start, tuple(group))


def split_text(text: str, budget: int, count: Callable[[str], int]) -> list[str]:
    """`text` cut into consecutive pieces of at most `budget` tokens, a piece's tokens being the sum of its
    parts'. Cut at sentence ends where that is enough, else between words, else inside a word. Joined, the
    pieces are `text`."""
    return list(_pieces(text, budget, count))


def _pieces(text: str, budget: int, count: Callable[[str], int]) -> Iterator[str]:
    """`split_text`'s pieces one at a time, so that a caller who needs only the first few stops the work."""
    current: list[str] = []
    held = 0
    for part, tokens in _parts(text, budget, count):
        if current and held + tokens > budget:
            yield "".join(current)
            current, held = [], 0
        current.append(part)
        held += tokens
    if current:
        yield "".join(current)


def _parts(text: str, budget: int, count: Callable[[str], int]) -> Iterator[tuple[str, int]]:
    """The sentences of `text` with their tokens; the words of a sentence over the budget; slices of a word over
    it. Every character is counted at most three times, and a text over `_COUNT_WINDOW` characters only as far
    as the budget needs."""
    # Every sentence end holds whitespace after a word: a text with none is one sentence, known without running the
    # pattern at each of its full stops (0.33 s for 8 MB of them).
    sentences = _cut_after(text, _SENTENCE_END) if len(text.split(None, 1)) > 1 else iter([text] if text else [])
    for sentence in sentences:
        tokens = _count_upto(sentence, budget, count)
        if tokens <= budget:
            yield sentence, tokens
            continue
        for word in _cut_after(sentence, _WORD_END):
            tokens = _count_upto(word, budget, count)
            if tokens <= budget:
                yield word, tokens
                continue
            # A token is at least one byte of UTF-8, a character at most four: budget // 4 characters fit.
            step = max(1, budget // 4)
            for offset in range(0, len(word), step):
                yield word[offset : offset + step], count(word[offset : offset + step])


def _cut_after(text: str, boundary: re.Pattern[str]) -> Iterator[str]:
    """`text` cut after each match of `boundary`; leading whitespace stays with the first part."""
    start = 0
    for match in boundary.finditer(text, len(text) - len(text.lstrip())):
        yield text[start : match.end()]
        start = match.end()
    if start < len(text):
        yield text[start:]


def _count_upto(text: str, budget: int, count: Callable[[str], int]) -> int:
    """`count(text)` for a text of at most `_COUNT_WINDOW` characters; for a longer one, the sum of its windows'
    counts, stopped once it passes `budget` (then a number over the budget, not the text's whole count)."""
    if len(text) <= _COUNT_WINDOW:
        return count(text)
    total = 0
    for offset in range(0, len(text), _COUNT_WINDOW):
        total += count(text[offset : offset + _COUNT_WINDOW])
        if total > budget:
            break
    return total


def _excerpt(request: ChatRequest, start: int, documents: Sequence[Document]) -> ChatRequest:
    """The request with only `documents`, numbered and separated as they are from position `start` on."""
    block = request.block
    assert block is not None
    base = None if block.numbering_base is None else block.numbering_base + start
    separators = block.separators[start:] or block.separators[-1:]
    block = replace(block, numbering_base=base, separators=separators)
    return replace(request, documents=tuple(documents), block=block)


def _worker_body(request: ChatRequest, chunk: Chunk, notes: str, max_tokens: int) -> dict[str, Any]:
    # The excerpt, not the request: rendering the whole request for every worker would cost its size per chunk.
    shown = _excerpt(request, chunk.start, chunk.documents)
    prompt = CHAIN_WORKER_PROMPT.format(documents=shown.documents_text(), notes=notes, question=request.question)
    return intermediate_body(shown, prompt, max_tokens)


def _manager_request(request: ChatRequest, notes: str) -> ChatRequest:
    """The client's request with the summary as its one document. It keeps the first document's message or
    content part (a role, a tool call's id), not its title: the summary is of all of them."""
    summary = replace(request.documents[0].derived(CHAIN_MANAGER_PROMPT.format(notes=notes)), title=None)
    return request.with_documents([summary])
