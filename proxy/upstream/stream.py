"""A streamed upstream completion: its SSE body read event by event, bounded, each event checked and the key
blanked, the connection given back exactly once however the stream ends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
from opentelemetry.trace import Span

from contextlift.proxy import json_text
from contextlift.proxy.errors import UpstreamProtocolError
from contextlift.proxy.upstream.bodies import Progress, decoded_chunks
from contextlift.proxy.upstream.client import StreamLimits
from contextlift.proxy.upstream.headers import relayed_headers
from contextlift.proxy.upstream.key_guard import KeyGuard
from contextlift.proxy.upstream.ledger import CallLedger
from contextlift.proxy.upstream.spans import describe_response
from contextlift.proxy.upstream.sse import DONE, SSEDecoder, SSEProtocolError
from contextlift.proxy.upstream.transport_errors import mapped_transport_errors


class HttpCompletionStream:
    """An upstream SSE response, decoded event by event; every event is checked to be a JSON object."""

    def __init__(
        self,
        response: httpx.Response,
        ledger: CallLedger,
        limits: StreamLimits,
        guard: KeyGuard,
        deadline: float,
        release: Callable[[], None],
    ) -> None:
        self._response = response
        self._release = release
        self._ledger = ledger
        self._limits = limits
        self._guard = guard
        self._deadline = deadline
        self._closed = False
        self._finished = False
        self._usage: Any = None
        self.headers: Mapping[str, str] = guard.blank_headers(relayed_headers(response.headers))
        self.span: Span | None = None

    async def events(self) -> AsyncIterator[str]:
        limits = self._limits
        decoder = SSEDecoder(limits.max_event_bytes)
        # The stall timer runs from one complete event to the next (and from the head to the first), never from
        # one byte to the next: an upstream writing a byte a second without ending an event is stalled.
        progress = Progress()
        body = decoded_chunks(
            self._response,
            max_bytes=limits.max_stream_bytes,
            stall_seconds=limits.stall_seconds,
            deadline=self._deadline,
            progress=progress,
        )
        try:
            with mapped_transport_errors("in the middle of the stream", answered=True):
                async for chunk in body:
                    for event in decoder.feed(chunk):
                        if event.data == DONE:
                            return
                        yield self._checked(event.data)
                        # Marked once the client has taken it: a slow client's time is not the upstream's silence.
                        progress.mark()
                for event in decoder.flush():
                    if event.data == DONE:
                        return
                    yield self._checked(event.data)
        except SSEProtocolError as error:
            raise UpstreamProtocolError(f"upstream stream is malformed: {error}") from None
        finally:
            await self.aclose()
        if not self._finished:
            raise UpstreamProtocolError("upstream stream ended without [DONE] before any finish_reason")

    def _checked(self, data: str) -> str:
        """The event's data, if it is a JSON object (the only events a chat stream has), the key blanked."""
        try:
            chunk = json_text.loads(data)
        except ValueError as error:
            raise UpstreamProtocolError(f"upstream sent an event that is not valid JSON: {error}") from None
        if not isinstance(chunk, dict):
            raise UpstreamProtocolError("upstream sent an event that is not a JSON object")
        if chunk.get("usage"):
            self._ledger.add_usage(chunk.get("usage"))
            self._usage = chunk.get("usage")
        choices = chunk.get("choices")
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
            # Several OpenAI-compatible servers end a complete stream here, without `[DONE]`: accepted.
            self._finished = True
        return self._guard.blank_text(data)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                await self._response.aclose()
            finally:
                self._ledger.finished()
                self._release()
            if self.span is not None:
                describe_response(self.span, {"usage": self._usage})
                self.span.end()
