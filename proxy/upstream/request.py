"""The upstream as one client request sees it (`strategies.Upstream`): its forwarded headers, its call budget
and retry budget, its lease on buffered bytes, one span per call, and its `CallLedger`. Chat completions go
through `complete` and `stream` (retried); any other `/v1` call through `relay` (sent once, as the client made it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from contextlift.proxy import json_text
from contextlift.proxy.budget import Lease
from contextlift.proxy.errors import (
    CallBudgetExhausted,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from contextlift.proxy.observability.telemetry import tracing
from contextlift.proxy.upstream.bodies import Progress, decoded_chunks
from contextlift.proxy.upstream.client import UpstreamClient, Verbatim
from contextlift.proxy.upstream.headers import client_retries, error_headers, relayed_headers, requested_retries
from contextlift.proxy.upstream.key_guard import KeyGuard
from contextlift.proxy.upstream.ledger import CallLedger
from contextlift.proxy.upstream.refusals import refused_fields
from contextlift.proxy.upstream.spans import describe_request, describe_response, span_name
from contextlift.proxy.upstream.stream import HttpCompletionStream
from contextlift.proxy.upstream.transport_errors import mapped_transport_errors
from contextlift.strategies import Completion

T = TypeVar("T")
_tracer = trace.get_tracer("contextlift.upstream")


class RequestUpstream:
    """`strategies.Upstream` for one client request: its headers, its ledger, its retry budget, its lease."""

    def __init__(
        self,
        client: UpstreamClient,
        inbound_headers: Mapping[str, str],
        budget: int = 1_000,
        *,
        retry_budget: int | None = None,
        lease: Lease | None = None,
        query: str = "",
        verbatim: Verbatim | None = None,
        large: bool = False,
        ledger: CallLedger | None = None,
    ) -> None:
        """The upstream as one client request sees it: carrying that client's forwarded headers, allowed at most
        `budget` upstream calls and `retry_budget` retries among them (none when the client's SDK says it retries
        itself, and no more than the client's `X-Context-Retries`), its buffered answers charged to `lease`, the
        client's `query` on every call, and the client's own bytes wherever a call sends the client's body
        unchanged (`verbatim`). The bodies of a `large` request are serialised in a worker thread, off the event
        loop. Calls are counted into `ledger` (the request record's).

        Raises:
            InvalidRequest: the client's `X-Context-Retries` is not a whole number.
        """
        self._client = client
        self._serialise_off_loop = large
        self._query = query
        self._verbatim = verbatim
        self._headers = client.forwarded(inbound_headers)
        self._budget = budget
        retries = client.retry.max_retries if retry_budget is None else retry_budget
        asked = requested_retries(inbound_headers)
        if asked is not None:
            retries = min(retries, asked)
        self._retries_left = 0 if client_retries(inbound_headers) else retries
        self._lease = lease
        self.guard = client.guard(self._headers)
        self.ledger = CallLedger() if ledger is None else ledger

    async def complete(self, body: Mapping[str, Any]) -> Completion:
        if not tracing():  # the span would be a no-op carrying its parent's ids (see `tracing`)
            return await self._with_retries(lambda: self._complete(body))
        with _tracer.start_as_current_span(span_name(body), kind=SpanKind.CLIENT) as span:
            describe_request(span, body, self._client.base_url, stream=False)
            try:
                completion = await self._with_retries(lambda: self._complete(body))
            except UpstreamError as error:
                span.set_status(Status(StatusCode.ERROR, error.code))
                span.set_attribute("error.type", error.code)
                raise
            describe_response(span, completion.body)
            return completion

    async def _complete(self, body: Mapping[str, Any]) -> Completion:
        content, headers = await self._chat_call(body)
        await self._client.reserve()
        deadline = self._client.deadline()
        self.ledger.started()
        try:
            async with asyncio.timeout(self._client.timeout):
                answer = await self._client.fetch(
                    "POST", "chat/completions", headers=headers, content=content, params=self._query or None,
                    waited=self.ledger.waited, lease=self._lease, deadline=deadline,
                )  # fmt: skip
        except TimeoutError:
            raise UpstreamTimeout(
                f"upstream did not answer within {self._client.timeout:g} s (CONTEXTLIFT_UPSTREAM_TIMEOUT)"
            ) from None
        finally:
            self.ledger.finished()
            self._client.release()
        if answer.status_code >= 300:
            raise self._status_error(answer.status_code, answer.headers, answer.body)
        content = self.guard.blank(answer.body)
        try:
            parsed = json_text.loads(content)
        except ValueError as error:
            raise UpstreamProtocolError(f"upstream returned a completion that is not valid JSON: {error}") from None
        if not isinstance(parsed, dict):
            raise UpstreamProtocolError("upstream returned a completion that is not a JSON object")
        self.ledger.add_usage(parsed.get("usage"))
        return Completion(parsed, self.guard.blank_headers(relayed_headers(answer.headers)), raw=content)

    async def stream(self, body: Mapping[str, Any]) -> HttpCompletionStream:
        if not tracing():
            return await self._with_retries(lambda: self._open_stream(body))
        span = _tracer.start_span(span_name(body), kind=SpanKind.CLIENT)
        describe_request(span, body, self._client.base_url, stream=True)
        try:
            stream = await self._with_retries(lambda: self._open_stream(body))
        except UpstreamError as error:
            span.set_status(Status(StatusCode.ERROR, error.code))
            span.set_attribute("error.type", error.code)
            span.end()
            raise
        stream.span = span
        return stream

    async def _open_stream(self, body: Mapping[str, Any]) -> HttpCompletionStream:
        content, headers = await self._chat_call(body)
        request = self._client.build_request(
            "POST", "chat/completions", headers=headers, content=content, params=self._query or None,
            waited=self.ledger.waited,
        )  # fmt: skip
        await self._client.reserve()
        deadline = self._client.deadline()
        self.ledger.started()
        try:
            async with asyncio.timeout(self._client.timeout):
                response = await self._client.send(request)
        except BaseException as error:
            self.ledger.finished()
            self._client.release()
            if isinstance(error, TimeoutError):
                message = (
                    f"upstream did not start its stream within {self._client.timeout:g} s "
                    "(CONTEXTLIFT_UPSTREAM_TIMEOUT)"
                )
                raise UpstreamTimeout(message) from None
            raise
        if response.status_code >= 300:
            try:
                content = await self._client.read(response, self._lease, deadline)
            finally:
                await response.aclose()
                self.ledger.finished()
                self._client.release()
            raise self._status_error(response.status_code, response.headers, content)
        return HttpCompletionStream(
            response, self.ledger, self._client.stream_limits, self.guard, deadline, self._client.release
        )

    async def relay(self, method: str, path: str, content: bytes | None) -> RelayedCall:
        """One call of any `/v1` endpoint, sent as the client made it (its method, path, body and query, the key
        swapped): no retries, no span. The caller reads the response through the returned call and closes it.

        Raises:
            UpstreamError: no connection came free, or the upstream could not be reached (counted as failed).
        """
        request = self._client.build_request(
            method, path, headers=self._headers, content=content, params=self._query or None, waited=self.ledger.waited
        )
        await self._client.reserve()
        call = RelayedCall(self._client, self.ledger, self._lease, self.guard)
        self.ledger.started()
        try:
            # The head must come within the timeout, however slowly the upstream reads the body or trickles it.
            async with asyncio.timeout(self._client.timeout):
                call.response = await self._client.send(request)
        except BaseException as error:
            call.finish()
            if isinstance(error, TimeoutError):
                error = UpstreamTimeout(
                    f"upstream did not answer within {self._client.timeout:g} s (CONTEXTLIFT_UPSTREAM_TIMEOUT)"
                )
                self.ledger.failed(error)
                raise error from None
            if isinstance(error, UpstreamError):
                self.ledger.failed(error)
            raise
        return call

    async def _with_retries(self, attempt: Callable[[], Awaitable[T]]) -> T:
        retries = 0
        while True:
            if self.ledger.calls >= self._budget:
                raise CallBudgetExhausted(
                    f"this request reached its limit of {self._budget} upstream calls (max_upstream_calls)"
                )
            try:
                return await attempt()
            except UpstreamError as error:
                self.ledger.failed(error)
                retries += 1
                # One retry budget per client request: a fan-out's calls draw on it together.
                delay = self._client.retry.delay(retries, error) if self._retries_left > 0 else None
                if delay is None:
                    raise
                self._retries_left -= 1
                self.ledger.retries += 1
                await asyncio.sleep(delay)

    def _status_error(self, status: int, headers: httpx.Headers, content: bytes) -> UpstreamStatusError:
        content = self.guard.blank(content)
        return UpstreamStatusError(
            status, content, self.guard.blank_headers(error_headers(headers)), refused=refused_fields(status, content)
        )

    async def _chat_call(self, body: Mapping[str, Any]) -> tuple[bytes, httpx.Headers]:
        """The body and headers of a chat call sending `body`."""
        if self._verbatim is not None and body == self._verbatim.body:
            # Nothing changed the client's body: its own bytes go, not a re-serialisation of them.
            content = self._verbatim.raw
        elif self._serialise_off_loop:
            content = (await anyio.to_thread.run_sync(_compact_json, body)).encode()
        else:
            content = _compact_json(body).encode()
        headers = httpx.Headers(self._headers)
        headers["content-type"] = "application/json"
        return content, headers


_BLANK_LINES = (b"\n\n", b"\r\r", b"\r\n\r\n")


def _compact_json(body: Mapping[str, Any]) -> str:
    return json_text.dumps(body, compact=True)


class RelayedCall:
    """A relayed call's response, read whole or chunk by chunk (decoded, bounded, failures mapped); its
    connection goes back to the pool and its ledger entry closes exactly once, by `aclose` or `finish`."""

    def __init__(self, client: UpstreamClient, ledger: CallLedger, lease: Lease | None, guard: KeyGuard) -> None:
        self._client = client
        self._ledger = ledger
        self._lease = lease
        self._deadline = client.deadline()
        self._finished = False
        self.guard = guard
        self.response: httpx.Response

    async def read(self) -> bytes:
        """The whole body, decoded, bounded, charged to the request's lease."""
        return await self._client.read(self.response, self._lease, self._deadline)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it comes, decoded and bounded by the stream limits. An event stream's stall timer runs
        from one complete event to the next, as a chat stream's does; the bytes still go as they came."""
        limits = self._client.stream_limits
        events = self.response.headers.get("content-type", "").lower().startswith("text/event-stream")
        progress = Progress() if events else None
        chunks = decoded_chunks(
            self.response,
            max_bytes=limits.max_stream_bytes,
            stall_seconds=limits.stall_seconds,
            deadline=self._deadline,
            progress=progress,
        )
        tail = b""
        with mapped_transport_errors("in the middle of the body", answered=True):
            async for chunk in chunks:
                if progress is None:
                    yield chunk
                    continue
                # An event ends at a blank line; the last bytes of the previous piece may hold its first half.
                window = tail + chunk
                ended = any(blank in window for blank in _BLANK_LINES)
                tail = window[-3:]
                yield chunk
                if ended:
                    progress.mark()

    def finish(self) -> None:
        """Give the connection back and close the ledger entry (once; later calls do nothing)."""
        if not self._finished:
            self._finished = True
            self._ledger.finished()
            self._client.release()

    async def aclose(self) -> None:
        try:
            await self.response.aclose()
        finally:
            self.finish()
