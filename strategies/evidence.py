"""Helpers shared by the executors that call the upstream more than once: intermediate request bodies,
answer text, usage sums, and checking that a recited or retrieved text really occurs in a document."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from strategies.request import ChatRequest, Document
from strategies.upstream import Completion, CompletionStream

if TYPE_CHECKING:
    from strategies.pipeline import StrategyOutcome

# Fields of the client's body that make no sense for an intermediate, plain-text call.
_NOT_FOR_INTERMEDIATE = ("stream", "stream_options", "n", "tools", "tool_choice", "response_format", "logprobs",
                         "top_logprobs", "max_completion_tokens", "parallel_tool_calls")  # fmt: skip
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\S+")
_EDGE_PUNCTUATION = " \t\n\"'`*-•\u201c\u201d\u2018\u2019"
MIN_LOCATED_CHARS = 8
"""A shorter snippet occurs by chance in too many documents to count as evidence."""


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
    choices = completion.body.get("choices") or []
    if not choices or not isinstance(choices[0], Mapping):
        return ""
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, str) else ""


def sum_usage(completions: Iterable[Completion]) -> dict[str, int]:
    total: dict[str, int] = {}
    for completion in completions:
        usage = completion.body.get("usage")
        if isinstance(usage, Mapping):
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                if isinstance(usage.get(key), int):
                    total[key] = total.get(key, 0) + usage[key]
    return total


def with_usage(completion: Completion, prior: Mapping[str, int]) -> Completion:
    """The completion with `prior` usage added to its own, so the client sees the total of all calls."""
    usage = sum_usage([completion, Completion({"usage": dict(prior)})])
    return Completion({**completion.body, "usage": usage} if usage else completion.body, completion.headers)


def normalize(text: str) -> str:
    return _SPACE.sub(" ", text).strip(_EDGE_PUNCTUATION).casefold()


def locate(snippet: str, documents: Iterable[Document]) -> int | None:
    """Index of the first document that contains `snippet` (whitespace and case aside), else None."""
    return locate_normalized(snippet, (normalize(d.text) for d in documents))


def locate_normalized(snippet: str, texts: Iterable[str]) -> int | None:
    """`locate` in texts already passed through `normalize`: a caller looking up every line of an answer
    normalizes the documents once, not once per line."""
    needle = normalize(snippet)
    if len(needle) < MIN_LOCATED_CHARS:
        return None
    for index, text in enumerate(texts):
        if needle in text:
            return index
    return None


def remove_snippet(document: Document, snippet: str) -> Document:
    """The document with `snippet` cut out of its text (matched across whitespace and case differences).

    The snippet's words must appear in order separated by whitespace: the first as the end of a word of the
    text, the middle ones as whole words, the last as the start of one (a single word anywhere). Linear in
    the text: the middle words are found with a Knuth-Morris-Pratt pass over the text's words, where a
    pattern of the words joined by `\\s+` would retry every word at every position.
    """
    needle = [w for w in normalize(snippet).split(" ") if w]
    if not needle:
        return document
    span = _snippet_span(document.text, needle)
    text = document.text if span is None else document.text[: span[0]] + " " + document.text[span[1] :]
    return document.derived(_SPACE.sub(" ", text).strip())


def _snippet_span(text: str, needle: list[str]) -> tuple[int, int] | None:
    """Start and end of the leftmost occurrence of `needle` in `text`, as `remove_snippet` matches it."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a case mapping that changes lengths: offsets would not line up
        lowered = text
    if len(needle) == 1:
        start = lowered.find(needle[0])
        return None if start < 0 else (start, start + len(needle[0]))
    words = [(m.start(), m.end()) for m in _WORD.finditer(lowered)]
    tokens = [lowered[a:b] for a, b in words]
    first, middle, last = needle[0], needle[1:-1], needle[-1]
    for at in _occurrences(tokens, middle, start=1):
        head, end_index = at - 1, at + len(middle)
        if end_index >= len(tokens):
            break
        if tokens[head].endswith(first) and tokens[end_index].startswith(last):
            return words[head][1] - len(first), words[end_index][0] + len(last)
    return None


def _occurrences(tokens: list[str], pattern: list[str], start: int) -> Iterator[int]:
    """Indexes at or after `start` where `pattern` occurs in `tokens`, in order (Knuth-Morris-Pratt)."""
    if not pattern:
        yield from range(start, len(tokens))
        return
    fallback = [0] * len(pattern)
    matched = 0
    for index in range(1, len(pattern)):
        while matched and pattern[index] != pattern[matched]:
            matched = fallback[matched - 1]
        if pattern[index] == pattern[matched]:
            matched += 1
        fallback[index] = matched
    matched = 0
    for index in range(start, len(tokens)):
        while matched and tokens[index] != pattern[matched]:
            matched = fallback[matched - 1]
        if tokens[index] == pattern[matched]:
            matched += 1
        if matched == len(pattern):
            yield index - len(pattern) + 1
            matched = fallback[matched - 1]


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
