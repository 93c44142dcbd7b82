"""`pick`: the user's own model chooses the passages (in-context retrieval, the ICR half of R&R: Agrawal et al.
2024, arXiv:2403.05004). Call 1 shows the model the request's passages, numbered by the proxy, with the question,
and asks for the numbers of the few that answer it; the request then goes on with those passages moved first, in
the order the model gave them, where the request proves its documents' boundaries, or quoted verbatim just before
the question where it does not (`excerpt`'s block). Nothing is dropped: where R&R answers from the picked
passages alone, the client's whole context stays, so a wrong pick costs a place, not the answer.

No ranker of the proxy's is involved: where a near miss shares the question's words and misleads BM25 or MiniLM,
the model reads the passages themselves. What it costs, said up front: one more call with the whole context
(`max_upstream_calls` 2), `max_tokens` of answer; the response's usage counts both. An answer that names no
passage, or a failed call, leaves the request as it came (`skipped=no-pick`, `skipped=pick-failed`).
"""

from __future__ import annotations

import random
import re
import zlib
from typing import ClassVar

import anyio

from contextlift.strategies.builtin.excerpt import DEFAULT_MAX_TOKENS, place_of, quote
from contextlift.strategies.builtin.prompts import PICK_PROMPT
from contextlift.strategies.plugin import (
    ChatRequest,
    Completion,
    Param,
    Params,
    StepContext,
    Transform,
    UpstreamFailure,
    answer_text,
    intermediate_body,
)

_NUMBER = re.compile(r"\d{1,6}")
MAX_PASSAGE_CHARS = 8_000
"""Characters of each passage shown in the picking call: a passage is found by what it says first, and a client's
outsized document must not make the extra call cost more than its own."""


class Pick(Transform):
    """Asks the upstream which passages answer the question, then moves (or quotes) those."""

    name: ClassVar[str] = "pick"
    reads_unmovable: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        Param("top", int, 2, "how many of the passages the model names are moved first (or quoted)", minimum=1,
              maximum=5),
        Param("max_tokens", int, 16, "token limit of the picking call's answer (a few numbers)", minimum=4,
              maximum=256),
        Param("quote_tokens", int, DEFAULT_MAX_TOKENS, "where the passages cannot move: the most tokens (cl100k) "
              "of quoted text", minimum=16, maximum=4096),
        Param("orders", int, 1, "picking calls, each with the passages numbered in another order (the client's, "
              "then reversed, then shuffled); with more than one, only passages every call names move: a model that "
              "names whatever is listed first is not followed", minimum=1, maximum=3),
    )  # fmt: skip

    def max_upstream_calls(self, params: Params) -> int:
        return int(params["orders"])

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        target = request if request.documents else request.unmovable
        if target is None or target.block is None or len(target.documents) < 2:
            return request  # one passage or none: nothing to choose among
        if not target.question:
            context.note("skipped=no-question")
            return request
        place = None
        if target is not request:
            place = await place_of(target, context)  # quoting needs a place before the question
            if place is None:
                return request
        orders = _orders(len(target.documents), int(params["orders"]), target.question)
        bodies = [
            await anyio.to_thread.run_sync(_picking_body, target, order, int(params["max_tokens"])) for order in orders
        ]
        try:
            answers = await _ask_all(bodies, context)
        except UpstreamFailure:
            context.note("skipped=pick-failed")
            return request
        context.prior_calls.extend(answers)
        named = [
            [order[i] for i in picked_passages(answer_text(answer), len(order), len(order))]
            for order, answer in zip(orders, answers, strict=True)
        ]
        picked = [i for i in named[0] if all(i in other for other in named[1:])][: int(params["top"])]
        if not picked:
            context.note("skipped=no-pick" if not all(named) else "skipped=disagree")
            return request
        context.note("picked=" + "+".join(str(i + 1) for i in picked))
        if place is not None:
            return await quote(request, target, place, picked, int(params["quote_tokens"]), context)
        first = [request.documents[i] for i in picked]
        return request.with_documents(first + [d for i, d in enumerate(request.documents) if i not in picked])


def picked_passages(answer: str, count: int, top: int) -> list[int]:
    """The passages (0-based) the answer names by number, in its order, each once, at most `top`; numbers out of
    range are not passages."""
    picked: list[int] = []
    for match in _NUMBER.finditer(answer[:2_000]):
        index = int(match.group()) - 1
        if 0 <= index < count and index not in picked:
            picked.append(index)
        if len(picked) == top:
            break
    return picked


def _orders(count: int, orders: int, question: str) -> list[list[int]]:
    """The passages' orders the picking calls number them in: the client's, reversed, then a shuffle seeded by the
    question (the same request is numbered the same way each time)."""
    chosen = [list(range(count)), list(range(count))[::-1]][:orders]
    if orders > 2:
        shuffled = list(range(count))
        random.Random(zlib.crc32(question.encode("utf-8", "replace"))).shuffle(shuffled)
        chosen.append(shuffled)
    return chosen


async def _ask_all(bodies: list[dict[str, object]], context: StepContext) -> list[Completion]:
    """Every picking call's answer, the calls made together.

    Raises:
        UpstreamFailure: any of them failed (the others are cancelled).
    """
    if len(bodies) == 1:
        return [await context.upstream.complete(bodies[0])]
    answers: list[Completion | None] = [None] * len(bodies)

    async def ask(index: int) -> None:
        answers[index] = await context.upstream.complete(bodies[index])

    try:
        async with anyio.create_task_group() as group:
            for index in range(len(bodies)):
                group.start_soon(ask, index)
    except BaseExceptionGroup as failed:  # a task group raises its tasks' errors as a group
        matched, _ = failed.split(UpstreamFailure)
        if matched is None:
            raise
        raise matched.exceptions[0] from None
    return [a for a in answers if a is not None]


def _picking_body(target: ChatRequest, order: list[int], max_tokens: int) -> dict[str, object]:
    passages = "\n\n".join(
        f"[{number}] {' '.join(target.documents[index].text[:MAX_PASSAGE_CHARS].split())}"
        for number, index in enumerate(order, start=1)
    )
    body = intermediate_body(target, PICK_PROMPT.format(passages=passages, question=target.question), max_tokens)
    body["temperature"] = 0  # a choice, not a sample: the same passages each time the same request comes
    return body
