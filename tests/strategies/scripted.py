"""A fake `strategies.Upstream` that replays scripted answers and records every body it was sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from contextlift.strategies import Completion, UpstreamFailure
from tests.fakes import completion


class FakeFailure(UpstreamFailure):
    """A scripted upstream failure."""


class FakeStream:
    def __init__(self, events: list[str]) -> None:
        self._events = events
        self.headers: Mapping[str, str] = {}
        self.closed = False

    async def events(self) -> AsyncIterator[str]:
        for event in self._events:
            yield event

    async def aclose(self) -> None:
        self.closed = True


class ScriptedUpstream:
    """Answers are strings (the completion's text), exceptions (raised), or `"hang"` (never answers).

    Calls are matched to answers in the order they start; concurrent calls get them in launch order.
    """

    def __init__(self, *answers: Any, stream_events: list[str] | None = None) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.streamed: list[dict[str, Any]] = []
        self.cancelled = 0
        self._stream_events = stream_events or []

    async def complete(self, body: Mapping[str, Any]) -> Completion:
        self.bodies.append(dict(body))
        answer = self.answers.pop(0) if self.answers else "default answer"
        if answer == "hang":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if isinstance(answer, BaseException):
            raise answer
        return Completion(completion(answer, prompt_tokens=10, completion_tokens=2))

    async def stream(self, body: Mapping[str, Any]) -> FakeStream:
        self.streamed.append(dict(body))
        return FakeStream(self._stream_events)

    @property
    def prompts(self) -> list[str]:
        return [b["messages"][-1]["content"] for b in self.bodies]
