"""Helpers shared by the executors that call the upstream more than once: intermediate request bodies,
answer text and usage sums. Where a recited or retrieved line came from is `contextlift.strategies.copied_text`."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from contextlift.strategies.request import ChatRequest
from contextlift.strategies.upstream import Completion, CompletionStream, StrategyOutcome, add_usage

# Fields of the client's body that make no sense for an intermediate, plain-text call.
_NOT_FOR_INTERMEDIATE = ("stream", "stream_options", "n", "tools", "tool_choice", "response_format", "logprobs",
                         "top_logprobs", "max_completion_tokens", "parallel_tool_calls")  # fmt: skip
_SPACE = re.compile(r"\s+")
_EDGE_PUNCTUATION = " \t\n\"'`*-•\u201c\u201d\u2018\u2019"


def intermediate_body(request: ChatRequest, prompt: str, max_tokens: int) -> dict[str, Any]:
    """A non-streamed body with the document message's content replaced by `prompt`, and the messages after
    it dropped (they are the question, already in the prompt)."""
    body = {k: v for k, v in request.render().items() if k not in _NOT_FOR_INTERMEDIATE}
    assert request.block is not None
    index = request.block.context_start
    messages = [dict(m) for m in body["messages"][:index]]
    messages.append({"role": "user", "content": prompt})
    body["messages"] = messages
    body["max_tokens"] = max_tokens
    return body


def answer_text(completion: Completion) -> str:
    """The first choice's text, or "" when an upstream's answer has none where OpenAI's shape puts it."""
    choices = completion.body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return ""
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else ""


def sum_usage(completions: Iterable[Completion]) -> dict[str, int]:
    total: dict[str, int] = {}
    for completion in completions:
        add_usage(total, completion.body.get("usage"))
    return total


def with_usage(completion: Completion, prior: Mapping[str, int]) -> Completion:
    """The completion with `prior` usage added to its own, so the client sees the total of all calls."""
    usage = sum_usage([completion, Completion({"usage": dict(prior)})])
    return Completion({**completion.body, "usage": usage} if usage else completion.body, completion.headers)


def normalize(text: str) -> str:
    return _SPACE.sub(" ", text).strip(_EDGE_PUNCTUATION).casefold()


class PriorUsageStream:
    """A stream whose usage chunk also counts the calls made before it."""

    def __init__(self, inner: CompletionStream, prior: Mapping[str, int]) -> None:
        self._inner = inner
        self.prior_usage = dict(prior)

    @property
    def headers(self) -> Mapping[str, str]:
        return self._inner.headers

    async def events(self) -> AsyncIterator[str]:
        async for data in self._inner.events():
            if '"usage"' in data:
                data = self._add_prior(data)
            yield data

    def _add_prior(self, data: str) -> str:
        try:
            chunk = json.loads(data)
        except ValueError:
            return data
        if not isinstance(chunk, dict) or not isinstance(chunk.get("usage"), Mapping):
            return data
        chunk["usage"] = {**chunk["usage"], **sum_usage([Completion(chunk), Completion({"usage": self.prior_usage})])}
        self.prior_usage = {}
        return json.dumps(chunk, separators=(",", ":"))

    async def aclose(self) -> None:
        await self._inner.aclose()


def with_prior_usage(outcome: StrategyOutcome, calls: list[Completion]) -> StrategyOutcome:
    """The final outcome, its usage counting the calls made before it."""
    prior = sum_usage(calls)
    if isinstance(outcome, Completion):
        return with_usage(outcome, prior)
    return PriorUsageStream(outcome, prior)
