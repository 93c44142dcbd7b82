"""The upstream client: one pooled `httpx.AsyncClient` for the configured base URL, and a per-request view
of it that implements `strategies.Upstream`, counts calls and sums usage.

The base URL comes from settings only; nothing in a request can change where calls go, and redirects are
never followed (a redirect is relayed to the client like any other response).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from proxy import json_text
from proxy.bodies import ACCEPT_ENCODING, decoded_chunks, read_body
from proxy.budget import Lease
from proxy.errors import (
    CallBudgetExhausted,
    UpstreamConnectionLost,
    UpstreamError,
    UpstreamPoolExhausted,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from proxy.key_guard import KeyGuard
from proxy.retry import RetryPolicy
from proxy.sse import DONE, SSEDecoder, SSEProtocolError
from proxy.upstream_headers import client_retries, error_headers, forwarded_headers, relayed_headers
from proxy.upstream_spans import describe_request, describe_response, span_name
from strategies import Completion

T = TypeVar("T")
_tracer = trace.get_tracer("contextlift.upstream")


def transport_error(error: httpx.HTTPError, what: str) -> UpstreamError:
    """The proxy error for an httpx failure: no pooled connection free, unreachable, timed out, or broken off."""
    if isinstance(error, httpx.PoolTimeout):
        return UpstreamPoolExhausted(
            "no upstream connection came free in time (upstream_max_connections); retry shortly",
            headers={"retry-after": "1"},
        )
    if isinstance(error, httpx.ConnectTimeout | httpx.ConnectError):
        return UpstreamUnreachable(f"upstream unreachable: cannot connect ({type(error).__name__})")
    if isinstance(error, httpx.TimeoutException):
        return UpstreamTimeout(f"upstream timed out {what}")
    return UpstreamConnectionLost(f"upstream connection failed {what} ({type(error).__name__})")


@dataclass(frozen=True, slots=True)
class Verbatim:
    """A client's chat body as it arrived (already checked to be strict JSON) and as parsed."""

    raw: bytes
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """Bounds on one upstream stream, so a stalled, endless or bloated one cannot hold a request forever."""

    stall_seconds: float
    """Longest silence between two chunks."""
    max_event_bytes: int = 1024 * 1024
    """A chat chunk is a few hundred bytes; anything this large is a broken upstream, not a token."""
    max_stream_bytes: int = 64 * 1024 * 1024
    """About 10 million tokens of chunks: far past any real completion, short of exhausting memory."""
    deadline_seconds: float = 900.0
    """Longest one attempt may take in all, so a stream trickling just faster than the stall bound ends."""
    max_body_bytes: int = 8 * 1024 * 1024
    """Largest answer read whole (a completion, an error body), decoded."""


class UpstreamClient:
    """The shared connection pool to the configured upstream."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        key_header: str = "authorization",
        timeout: float,
        connect_timeout: float,
        max_connections: int,
        retry: RetryPolicy | None = None,
        stream_limits: StreamLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        # A base URL may carry its own query (Azure's `?api-version=...`): kept apart, merged into every call.
        base = httpx.URL(base_url)
        self.base_url = str(base.copy_with(query=None, fragment=None)).rstrip("/")
        self.base_params = base.params
        self.api_key = api_key
        self.key_header = key_header.lower()
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.stream_limits = stream_limits or StreamLimits(stall_seconds=timeout)
        self._slots = asyncio.Semaphore(max_connections)
        self._client = httpx.AsyncClient(
            # A call waits for a free pooled connection as long as it would wait for the upstream; a wait
            # that still runs out is reported as the proxy's (UpstreamPoolExhausted), not the upstream's.
            timeout=httpx.Timeout(timeout, connect=connect_timeout, pool=timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            follow_redirects=False,
            transport=transport,
            headers={"accept-encoding": ACCEPT_ENCODING},
            cookies=_NO_COOKIES,
        )

    def url(self, path: str) -> str:
        """Absolute upstream URL of a path below the base URL (`chat/completions`, `models` ...)."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def for_request(
        self,
        inbound_headers: Mapping[str, str],
        budget: int = 1_000,
        *,
        retry_budget: int | None = None,
        lease: Lease | None = None,
        query: str = "",
        verbatim: Verbatim | None = None,
        large: bool = False,
    ) -> RequestUpstream:
        """A view of the upstream for one client request, carrying that client's forwarded headers, allowed
        at most `budget` upstream calls and `retry_budget` retries among them (none when the client's SDK
        says it retries itself), its buffered answers charged to `lease`, the client's `query` on every call,
        and the client's own bytes wherever a call sends the client's body unchanged (`verbatim`). The bodies
        of a `large` request are serialised in a worker thread, off the event loop."""
        retries = self.retry.max_retries if retry_budget is None else retry_budget
        if client_retries(inbound_headers):
            retries = 0
        headers = self.forwarded(inbound_headers)
        return RequestUpstream(
            self, headers, budget, retries=retries, lease=lease, query=query, verbatim=verbatim, large=large
        )

    def forwarded(self, inbound_headers: Mapping[str, str]) -> dict[str, str]:
        """A client's headers as they go upstream (see `forwarded_headers`)."""
        return forwarded_headers(inbound_headers, self.api_key, self.key_header)

    def guard(self, forwarded: Mapping[str, str]) -> KeyGuard:
        """The guard of the key these forwarded headers carry."""
        return KeyGuard.for_headers(forwarded, self.key_header)

    async def reserve(self) -> None:
        """Wait until one of the pool's connections is this call's. The wait happens inside the proxy (many
        requests, or a fan-out, want more connections than the pool has), so it is bounded by the upstream
        timeout but never counted in it, and running out is the proxy's 503, never the upstream's 504.
        Every `reserve` is paired with one `release` when the call's response is closed.

        Raises:
            UpstreamPoolExhausted: no connection came free within the upstream timeout.
        """
        try:
            async with asyncio.timeout(self.timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamPoolExhausted(
                f"no upstream connection came free within {self.timeout:g} s (upstream_max_connections)",
                headers={"retry-after": "1"},
            ) from None

    def release(self) -> None:
        self._slots.release()

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send a prepared request, streaming the response; the caller reserved a connection and closes it."""
        try:
            return await self._client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise transport_error(error, "before answering") from None

    def deadline(self) -> float:
        """`time.monotonic()` by which an attempt starting now must be complete."""
        return time.monotonic() + self.stream_limits.deadline_seconds

    async def read(self, response: httpx.Response, lease: Lease | None, deadline: float) -> bytes:
        """A response's whole body, decoded, bounded, charged to `lease`."""
        limits = self.stream_limits
        try:
            return await read_body(
                response, max_bytes=limits.max_body_bytes, stall_seconds=self.timeout, deadline=deadline, lease=lease
            )
        except httpx.HTTPError as error:
            raise transport_error(error, "while answering") from None

    def build_request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
        params: str | None = None,
    ) -> httpx.Request:
        """A request to `path` below the base URL, with the base URL's query and then the client's."""
        merged = self.base_params.merge(httpx.QueryParams(params)) if params else self.base_params
        return self._client.build_request(method, self.url(path), headers=headers, content=content, params=merged)

    async def reachable(self, probe_seconds: float = 3.0) -> bool:
        """Whether the upstream answers HTTP at all (an auth error still means reachable)."""
        request = self._client.build_request(
            "GET", self.url("models"), headers=self.forwarded({}), params=self.base_params, timeout=probe_seconds
        )
        try:
            # Streamed and closed unread: the status is all a probe needs, and a body could be a bomb.
            response = await self._client.send(request, stream=True)
            await response.aclose()
        except httpx.HTTPError:
            return False
        return response.status_code < 500

    async def aclose(self) -> None:
        await self._client.aclose()


@dataclass(slots=True)
class CallLedger:
    """Counts of one client request's upstream calls, for its response headers and its log line."""

    calls: int = 0
    """HTTP requests sent upstream, retries included."""
    failure_codes: list[str] = field(default_factory=list)
    retries: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    _in_flight: int = 0
    _busy_since: float = 0.0
    busy_seconds: float = 0.0
    """Wall-clock time with at least one upstream call in flight: the part of the latency not ours."""

    def started(self) -> None:
        self.calls += 1
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1

    def finished(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self.busy_seconds += time.perf_counter() - self._busy_since

    def failed(self, error: UpstreamError) -> None:
        code = f"status_{error.upstream_status}" if isinstance(error, UpstreamStatusError) else error.code
        self.failure_codes.append(code)

    def failures_summary(self) -> str:
        """`status_503=2, upstream_timeout=1`, or `none`."""
        counts: dict[str, int] = {}
        for code in self.failure_codes:
            counts[code] = counts.get(code, 0) + 1
        return ", ".join(f"{code}={count}" for code, count in counts.items()) or "none"

    def add_usage(self, usage: Any) -> None:
        if not isinstance(usage, Mapping):
            return
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = usage.get(key)
            if isinstance(value, int):
                self.usage[key] = self.usage.get(key, 0) + value


class RequestUpstream:
    """`strategies.Upstream` for one client request: its headers, its ledger, its retry budget, its lease."""

    def __init__(
        self,
        client: UpstreamClient,
        headers: dict[str, str],
        budget: int,
        *,
        retries: int | None = None,
        lease: Lease | None = None,
        query: str = "",
        verbatim: Verbatim | None = None,
        large: bool = False,
    ) -> None:
        self._client = client
        self._serialise_off_loop = large
        self._query = query
        self._verbatim = verbatim
        self._headers = headers
        self._budget = budget
        self._retries_left = client.retry.max_retries if retries is None else retries
        self._lease = lease
        self.guard = client.guard(headers)
        self.ledger = CallLedger()

    async def complete(self, body: Mapping[str, Any]) -> Completion:
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
        request = await self._chat_request(body)
        await self._client.reserve()
        deadline = self._client.deadline()
        self.ledger.started()
        try:
            async with asyncio.timeout(self._client.timeout):
                response = await self._client.send(request)
                try:
                    content = await self._client.read(response, self._lease, deadline)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise UpstreamTimeout(f"upstream did not answer within {self._client.timeout:g} s") from None
        finally:
            self.ledger.finished()
            self._client.release()
        if response.status_code >= 300:
            raise self._status_error(response, content)
        try:
            parsed = json_text.loads(self.guard.blank(content))
        except ValueError as error:
            raise UpstreamProtocolError(f"upstream returned a completion that is not valid JSON: {error}") from None
        if not isinstance(parsed, dict):
            raise UpstreamProtocolError("upstream returned a completion that is not a JSON object")
        self.ledger.add_usage(parsed.get("usage"))
        return Completion(parsed, self.guard.blank_headers(relayed_headers(response.headers)))

    async def stream(self, body: Mapping[str, Any]) -> HttpCompletionStream:
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
        request = await self._chat_request(body)
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
                message = f"upstream did not start its stream within {self._client.timeout:g} s"
                raise UpstreamTimeout(message) from None
            raise
        if response.status_code >= 300:
            try:
                content = await self._client.read(response, self._lease, deadline)
            finally:
                await response.aclose()
                self.ledger.finished()
                self._client.release()
            raise self._status_error(response, content)
        return HttpCompletionStream(
            response, self.ledger, self._client.stream_limits, self.guard, deadline, self._client.release
        )

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

    def _status_error(self, response: httpx.Response, content: bytes) -> UpstreamStatusError:
        return UpstreamStatusError(
            response.status_code, self.guard.blank(content), self.guard.blank_headers(error_headers(response))
        )

    async def _chat_request(self, body: Mapping[str, Any]) -> httpx.Request:
        if self._verbatim is not None and body == self._verbatim.body:
            # Nothing changed the client's body: its own bytes go, not a re-serialisation of them.
            content = self._verbatim.raw
        elif self._serialise_off_loop:
            content = (await anyio.to_thread.run_sync(_compact_json, body)).encode()
        else:
            content = _compact_json(body).encode()
        headers = {**self._headers, "content-type": "application/json"}
        return self._client.build_request(
            "POST", "chat/completions", headers=headers, content=content, params=self._query or None
        )


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
        body = decoded_chunks(
            self._response,
            max_bytes=limits.max_stream_bytes,
            stall_seconds=limits.stall_seconds,
            deadline=self._deadline,
        )
        try:
            async for chunk in body:
                for event in decoder.feed(chunk):
                    if event.data == DONE:
                        return
                    yield self._checked(event.data)
            for event in decoder.flush():
                if event.data == DONE:
                    return
                yield self._checked(event.data)
        except SSEProtocolError as error:
            raise UpstreamProtocolError(f"upstream stream is malformed: {error}") from None
        except httpx.HTTPError as error:
            raise transport_error(error, "in the middle of the stream") from None
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


def _compact_json(body: Mapping[str, Any]) -> str:
    return json_text.dumps(body, compact=True)


class _RefuseAll(http.cookiejar.DefaultCookiePolicy):
    """No cookie is ever stored: a `Set-Cookie` answering one client must not ride along with another's."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


_NO_COOKIES = http.cookiejar.CookieJar(policy=_RefuseAll())
