"""A request sampled for shadow evaluation: what was served, kept in memory until the response has been sent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strategies import ChatRequest, Completion, Pipeline
from strategies.plugin import answer_text

MAX_ANSWER_CHARS = 64 * 1024
"""The served answer is kept up to here: enough to compare any chat answer, bounded against an endless stream."""


@dataclass(slots=True)
class ShadowCase:
    """The request as the proxy parsed it (documents found), the pipeline that served it, and its answer."""

    request: ChatRequest
    served: Pipeline
    inbound_headers: Mapping[str, str]
    """The client's headers, for the shadow calls to carry its key where the operator has none; never written."""
    model: str | None
    pieces: list[str] = field(default_factory=list)
    _chars: int = 0

    @property
    def answer(self) -> str:
        return "".join(self.pieces)

    def served_completion(self, completion: Completion) -> None:
        self._add(answer_text(completion))

    def served_event(self, data: str) -> None:
        """One relayed stream event: its content delta, if any, is part of the served answer."""
        if self._chars >= MAX_ANSWER_CHARS:
            return
        try:
            chunk: Any = json.loads(data)
        except ValueError:
            return
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        delta = first.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("content"), str):
            self._add(delta["content"])

    def _add(self, text: str) -> None:
        text = text[: MAX_ANSWER_CHARS - self._chars]
        self.pieces.append(text)
        self._chars += len(text)
