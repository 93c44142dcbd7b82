"""A request sampled for shadow evaluation: what was served, kept in memory until the response has been sent.

Everything here runs in the client's request path, so nothing here may fail it: a method that meets something it
cannot read marks the case unusable instead of raising, and the work in proportion to the request (finding its
documents) is left to the shadow worker, after the response.

A queued case holds the client's body as the bytes it came in, not parsed: parsed JSON costs many times its size
in Python objects (a 1 MB body of `[[],[],...]` is ~25 MiB of lists, plain text ~5 MiB), so the queue's memory
would not be what `shadow_max_body_bytes` x `shadow_queue` says. The worker parses it when the sample runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contextlift.strategies import Completion, Pipeline

MAX_ANSWER_CHARS = 64 * 1024
"""The served answer is kept up to here: enough to compare any chat answer, bounded against an endless stream."""


@dataclass(frozen=True, slots=True)
class ShadowAnswer:
    """One shadow run's answer and what it cost."""

    text: str
    calls: int
    tokens: int
    seconds: float
    error: str | None = None


@dataclass(slots=True)
class ShadowCase:
    """The client's request as parsed, the pipeline that served it, and its answer as relayed."""

    raw: bytes
    """The client's body as it came (parsed again by the worker: see the module's docstring)."""
    served: Pipeline
    inbound_headers: Mapping[str, str]
    """The client's headers, for the shadow calls to carry its key where the operator has none; never written."""
    query: str
    """The client's query string (an Azure-style `api-version`), sent on every shadow call as on the served one."""
    model: str | None
    shape: str | None = None
    """The document shape serving looked for (a pipeline's `format=`), which the worker looks for again."""
    served_margin: float | None = None
    """The served pipeline's first ranking's margin (`strategies.rankers.ranker_margin`): None where no step ranked
    or its ranker fell back. The report shows it beside what was measured."""
    pieces: list[str] = field(default_factory=list)
    unusable: bool = False
    """The served answer could not be read (an upstream's malformed answer): nothing to compare with."""
    _chars: int = 0

    @property
    def answer(self) -> str:
        return "".join(self.pieces)

    def served_completion(self, completion: Completion) -> None:
        try:
            choices = completion.body.get("choices")
            message = choices[0].get("message") if isinstance(choices, list) and choices else None
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, str):
                self._add(content)
        except Exception:  # never the client's problem: an answer this cannot read is one not to compare
            self.unusable = True

    def served_event(self, data: str) -> None:
        """One relayed stream event: the content delta of its first choice, if any, is part of the served answer."""
        if self._chars >= MAX_ANSWER_CHARS or self.unusable:
            return
        try:
            chunk: Any = json.loads(data)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") if isinstance(choice, dict) and choice.get("index", 0) == 0 else None
                if isinstance(delta, dict) and isinstance(delta.get("content"), str) and delta["content"]:
                    self._add(delta["content"])
        except Exception:  # as above
            self.unusable = True

    def _add(self, text: str) -> None:
        text = text[: MAX_ANSWER_CHARS - self._chars]
        self.pieces.append(text)
        self._chars += len(text)
