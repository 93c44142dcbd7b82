"""The upstream client: one pooled `httpx.AsyncClient` for the configured base URL, and a per-request view
of it that implements `strategies.Upstream`, counts calls and sums usage.

The base URL comes from settings only; nothing in a request can change where calls go, and redirects are
never followed (a redirect is relayed to the client like any other response).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from proxy.errors import (
    CallBudgetExhausted,
    UpstreamConnectionLost,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from proxy.retry import RetryPolicy
from proxy.sse import DONE, SSEDecoder, SSEProtocolError
from strategies import Completion

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Never sent upstream: hop-by-hop, what httpx sets itself, and the proxy's own control headers.
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding", "x-request-id", "cookie"}
_CONTROL_PREFIX = "x-context-"
# Relayed from upstream responses to the client: what an OpenAI client reads (retries, rate limits, timing).
_RELAYED_EXACT = frozenset({"retry-after", "retry-after-ms", "openai-processing-ms", "openai-version"})
_RELAYED_PREFIXES = ("x-ratelimit-",)
_MAX_ERROR_BODY = 1024 * 1024
T = TypeVar("T")
_tracer = trace.get_tracer("contextlift.upstream")


def forwarded_headers(inbound: Mapping[str, str], api_key: str | None) -> dict[str, str]:
    """The client's headers as they go upstream: control and hop-by-hop headers removed, the key applied."""
    connection_listed = {h.strip().lower() for h in inbound.get("connection", "").split(",") if h.strip()}
    headers = {
        name: value
        for name, value in inbound.items()
        if name.lower() not in _NOT_FORWARDED
        and name.lower() not in connection_listed
        and not name.lower().startswith(_CONTROL_PREFIX)
    }
    if api_key is not None:
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def relayed_headers(upstream: httpx.Headers) -> dict[str, str]:
    """The upstream response headers an OpenAI client should see through the proxy."""
    relayed = {
        name: value for name, value in upstream.items() if name in _RELAYED_EXACT or name.startswith(_RELAYED_PREFIXES)
    }
    if "x-request-id" in upstream:
        relayed["x-upstream-request-id"] = upstream["x-request-id"]
    return relayed


def transport_error(error: httpx.HTTPError, what: str) -> UpstreamError:
    """The proxy error for an httpx failure: unreachable, timed out, or broken off."""
    if isinstance(error, httpx.ConnectTimeout | httpx.ConnectError):
        return UpstreamUnreachable(f"upstream unreachable: cannot connect ({type(error).__name__})")
    if isinstance(error, httpx.TimeoutException):
        return UpstreamTimeout(f"upstream timed out {what}")
    return UpstreamConnectionLost(f"upstream connection failed {what} ({type(error).__name__})")


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """Bounds on one upstream stream, so a stalled, endless or bloated one cannot hold a request forever."""

    stall_seconds: float
    """Longest silence between two chunks."""
    max_event_bytes: int = 4 * 1024 * 1024
    """A chat chunk is a few hundred bytes; anything this large is a broken upstream, not a token."""
    max_stream_bytes: int = 64 * 1024 * 1024
    """About 10 million tokens of chunks: far past any real completion, short of exhausting memory."""


class UpstreamClient:
    """The shared connection pool to the configured upstream."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        timeout: float,
        connect_timeout: float,
        max_connections: int,
        retry: RetryPolicy | None = None,
        stream_limits: StreamLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.stream_limits = stream_limits or StreamLimits(stall_seconds=timeout)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=connect_timeout, pool=connect_timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            follow_redirects=False,
            transport=transport,
        )

    def url(self, path: str) -> str:
        """Absolute upstream URL of a path below the base URL (`chat/completions`, `models` ...)."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def for_request(self, inbound_headers: Mapping[str, str], budget: int = 1_000) -> RequestUpstream:
        """A view of the upstream for one client request, carrying that client's forwarded headers and
        allowed at most `budget` upstream calls."""
        return RequestUpstream(self, forwarded_headers(inbound_headers, self.api_key), budget)

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send a prepared request, streaming the response; the caller closes it."""
        try:
            return await self._client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise transport_error(error, "before answering") from None

    def build_request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
        params: str | None = None,
    ) -> httpx.Request:
        return self._client.build_request(method, self.url(path), headers=headers, content=content, params=params)

    async def reachable(self, probe_seconds: float = 3.0) -> bool:
        """Whether the upstream answers HTTP at all (an auth error still means reachable)."""
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = await self._client.get(self.url("models"), headers=headers, timeout=probe_seconds)
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
    """`strategies.Upstream` for one client request: its headers, its ledger."""

    def __init__(self, client: UpstreamClient, headers: dict[str, str], budget: int) -> None:
        self._client = client
        self._headers = headers
        self._budget = budget
        self.ledger = CallLedger()

    async def complete(self, body: Mapping[str, Any]) -> Completion:
        with _tracer.start_as_current_span(_span_name(body), kind=SpanKind.CLIENT) as span:
            _describe_request(span, body, self._client.base_url, stream=False)
            try:
                completion = await self._with_retries(lambda: self._complete(body))
            except UpstreamError as error:
                span.set_status(Status(StatusCode.ERROR, error.code))
                span.set_attribute("error.type", error.code)
                raise
            _describe_response(span, completion.body)
            return completion

    async def _complete(self, body: Mapping[str, Any]) -> Completion:
        request = self._chat_request(body)
        self.ledger.started()
        try:
            async with asyncio.timeout(self._client.timeout):
                response = await self._client.send(request)
                try:
                    content = await response.aread()
                finally:
                    await response.aclose()
        except TimeoutError:
            raise UpstreamTimeout(f"upstream did not answer within {self._client.timeout:g} s") from None
        except UpstreamError:
            raise
        except httpx.HTTPError as error:
            raise transport_error(error, "while answering") from None
        finally:
            self.ledger.finished()
        if response.status_code >= 300:
            raise UpstreamStatusError(response.status_code, self._without_key(content), _error_headers(response))
        try:
            parsed = json.loads(content)
        except ValueError:
            raise UpstreamProtocolError("upstream returned a completion that is not JSON") from None
        if not isinstance(parsed, dict):
            raise UpstreamProtocolError("upstream returned a completion that is not a JSON object")
        self.ledger.add_usage(parsed.get("usage"))
        return Completion(parsed, relayed_headers(response.headers))

    async def stream(self, body: Mapping[str, Any]) -> HttpCompletionStream:
        span = _tracer.start_span(_span_name(body), kind=SpanKind.CLIENT)
        _describe_request(span, body, self._client.base_url, stream=True)
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
        request = self._chat_request(body)
        self.ledger.started()
        try:
            async with asyncio.timeout(self._client.timeout):
                response = await self._client.send(request)
        except TimeoutError:
            self.ledger.finished()
            raise UpstreamTimeout(f"upstream did not start its stream within {self._client.timeout:g} s") from None
        except UpstreamError:
            self.ledger.finished()
            raise
        if response.status_code >= 300:
            try:
                content = await _bounded_read(response)
            finally:
                await response.aclose()
                self.ledger.finished()
            raise UpstreamStatusError(response.status_code, self._without_key(content), _error_headers(response))
        return HttpCompletionStream(response, self.ledger, self._client.stream_limits)

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
                delay = self._client.retry.delay(retries, error)
                if delay is None:
                    raise
                self.ledger.retries += 1
                await asyncio.sleep(delay)

    def _without_key(self, content: bytes) -> bytes:
        """An upstream error body with the key we sent blanked out: upstreams echo rejected keys."""
        _, _, key = self._headers.get("authorization", "").partition(" ")
        return content.replace(key.encode(), b"[redacted]") if len(key) >= 8 else content

    def _chat_request(self, body: Mapping[str, Any]) -> httpx.Request:
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        headers = {**self._headers, "content-type": "application/json"}
        return self._client.build_request("POST", "chat/completions", headers=headers, content=content)


class HttpCompletionStream:
    """An upstream SSE response, decoded event by event."""

    def __init__(self, response: httpx.Response, ledger: CallLedger, limits: StreamLimits) -> None:
        self._response = response
        self._ledger = ledger
        self._limits = limits
        self._closed = False
        self._usage: Any = None
        self.headers: Mapping[str, str] = relayed_headers(response.headers)
        self.span: Span | None = None

    async def events(self) -> AsyncIterator[str]:
        decoder = SSEDecoder(self._limits.max_event_bytes)
        chunks = aiter(self._response.aiter_bytes())
        received = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(self._limits.stall_seconds):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise UpstreamTimeout(
                        f"upstream stream stalled: nothing for {self._limits.stall_seconds:g} s"
                    ) from None
                received += len(chunk)
                if received > self._limits.max_stream_bytes:
                    raise UpstreamProtocolError(
                        f"upstream stream longer than the limit of {self._limits.max_stream_bytes} bytes"
                    )
                for event in decoder.feed(chunk):
                    if event.data == DONE:
                        return
                    self._note_usage(event.data)
                    yield event.data
            for event in decoder.flush():
                if event.data == DONE:
                    return
                self._note_usage(event.data)
                yield event.data
        except SSEProtocolError as error:
            raise UpstreamProtocolError(f"upstream stream is malformed: {error}") from None
        except httpx.HTTPError as error:
            raise transport_error(error, "in the middle of the stream") from None
        finally:
            await self.aclose()
        raise UpstreamProtocolError("upstream stream ended without [DONE]")

    def _note_usage(self, data: str) -> None:
        if '"usage"' not in data:
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        if isinstance(chunk, dict):
            self._ledger.add_usage(chunk.get("usage"))
            self._usage = chunk.get("usage") or self._usage

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._response.aclose()
            self._ledger.finished()
            if self.span is not None:
                _describe_response(self.span, {"usage": self._usage})
                self.span.end()


def _span_name(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    return f"chat {model}" if isinstance(model, str) else "chat"


def _describe_request(span: Span, body: Mapping[str, Any], base_url: str, *, stream: bool) -> None:
    """GenAI semantic-convention attributes of a call; message content is never recorded."""
    span.set_attribute("gen_ai.operation.name", "chat")
    span.set_attribute("gen_ai.system", "openai")
    if isinstance(body.get("model"), str):
        span.set_attribute("gen_ai.request.model", body["model"])
    for field_name, attribute in (("max_tokens", "gen_ai.request.max_tokens"),
                                  ("temperature", "gen_ai.request.temperature"),
                                  ("top_p", "gen_ai.request.top_p")):  # fmt: skip
        if isinstance(body.get(field_name), int | float) and not isinstance(body.get(field_name), bool):
            span.set_attribute(attribute, body[field_name])
    url = httpx.URL(base_url)
    span.set_attribute("server.address", url.host)
    if url.port:
        span.set_attribute("server.port", url.port)
    span.set_attribute("contextlift.stream", stream)


def _describe_response(span: Span, body: Mapping[str, Any]) -> None:
    if isinstance(body.get("model"), str):
        span.set_attribute("gen_ai.response.model", body["model"])
    usage = body.get("usage")
    if isinstance(usage, Mapping):
        if isinstance(usage.get("prompt_tokens"), int):
            span.set_attribute("gen_ai.usage.input_tokens", usage["prompt_tokens"])
        if isinstance(usage.get("completion_tokens"), int):
            span.set_attribute("gen_ai.usage.output_tokens", usage["completion_tokens"])
    choices = body.get("choices")
    if isinstance(choices, list):
        reasons = [c.get("finish_reason") for c in choices if isinstance(c, Mapping) and c.get("finish_reason")]
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)


def _error_headers(response: httpx.Response) -> dict[str, str]:
    headers = relayed_headers(response.headers)
    for name in ("content-type", "location"):
        if name in response.headers:
            headers[name] = response.headers[name]
    return headers


async def _bounded_read(response: httpx.Response) -> bytes:
    content = b""
    async for chunk in response.aiter_bytes():
        content += chunk
        if len(content) > _MAX_ERROR_BODY:
            return content[:_MAX_ERROR_BODY]
    return content
