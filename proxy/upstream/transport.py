"""The upstream transport: httpx's API over aiohttp's connection pool, the one way every upstream call goes.

Why not httpx's own pool: httpcore's `AsyncConnectionPool` re-examines every pooled connection (a socket poll each)
on every pool event, so the proxy's throughput fell as concurrency rose (side by side in docs/performance.md);
with few connections it keeps its speed but then holds only that many upstream calls at once, which a slow LLM
upstream cannot afford. The rest of the proxy keeps httpx's request and response types
through httpx-aiohttp's `AiohttpTransport` (by httpx's maintainers; the transport the openai SDK offers).

What this module adds to it, because the proxy's guarantees depend on it:
- aiohttp's errors mapped to httpx's by our own rule, the most specific aiohttp class winning. httpx-aiohttp's
  table reports a server that hung up, or a read that timed out, as a `ConnectTimeout` ("unreachable"); here they
  are `RemoteProtocolError` (connection lost) and `ReadTimeout`, as httpx's own pool reports them, both before the
  answer and while its body streams.
- a session that stores no cookie, adds no header of its own (httpx's request already holds every header that
  goes upstream), never decompresses (the proxy decodes, bounded, in `proxy.upstream.bodies`) and never follows a
  redirect.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import aiohttp.payload
import httpx
import yarl
from httpx_aiohttp import AiohttpTransport

from contextlift.proxy.upstream.answers import (
    MAX_HEAD_LINE_BYTES,
    MAX_RESPONSE_HEADERS,
    SENT_EXTENSION,
    WAIT_EXTENSION,
    MalformedAnswer,
    RawAnswer,
)

__all__ = [
    "SENT_EXTENSION",
    "WAIT_EXTENSION",
    "MalformedAnswer",
    "RawAnswer",
    "TimedTransport",
    "build_transport",
]

# Most specific first is not needed: `_mapped` picks the class no other match derives from.
_AIOHTTP_TO_HTTPX: dict[type[BaseException], type[httpx.TransportError]] = {
    aiohttp.ClientError: httpx.TransportError,
    aiohttp.ClientConnectionError: httpx.NetworkError,
    aiohttp.ClientOSError: httpx.NetworkError,
    aiohttp.ClientConnectorError: httpx.ConnectError,
    aiohttp.ConnectionTimeoutError: httpx.ConnectTimeout,
    aiohttp.ServerDisconnectedError: httpx.RemoteProtocolError,
    aiohttp.ServerTimeoutError: httpx.ReadTimeout,
    aiohttp.SocketTimeoutError: httpx.ReadTimeout,
    aiohttp.ClientPayloadError: httpx.RemoteProtocolError,
    # Raised by aiohttp's response parser only (the proxy never calls raise_for_status): the head was malformed.
    aiohttp.ClientResponseError: MalformedAnswer,
    aiohttp.InvalidURL: httpx.UnsupportedProtocol,
    TimeoutError: httpx.ReadTimeout,
}


def _mapped(error: BaseException) -> type[httpx.TransportError] | None:
    matches = [cls for cls in _AIOHTTP_TO_HTTPX if isinstance(error, cls)]
    if not matches:
        return None
    return _AIOHTTP_TO_HTTPX[next(c for c in matches if not any(o is not c and issubclass(o, c) for o in matches))]


class _AiohttpBody(httpx.AsyncByteStream):
    """An aiohttp answer's body as httpx reads it, in pieces of at most `CHUNK_BYTES`: aiohttp's errors mapped by
    our rule and, where the call asked (`WAIT_EXTENSION`), each wait for the next piece timed. One generator a
    piece where httpx-aiohttp's stream, the mapping around it and `TimedTransport`'s timer made three, with two
    context managers and a second `httpx.Response`."""

    CHUNK_BYTES = 16 * 1024
    """As httpx-aiohttp reads a body."""

    def __init__(self, response: aiohttp.ClientResponse, waited: Callable[[float, float], None] | None) -> None:
        self._response = response
        self._waited = waited

    def ready(self) -> bool:
        """Whether the rest of the body is in: the next read cannot wait."""
        return self._response.content.is_eof()

    async def next_piece(self) -> bytes:
        """The body's next piece, b"" at its end: once the whole body is in, without waiting for an empty read (a
        small answer's one piece)."""
        content = self._response.content
        if content.at_eof():
            return b""
        start = time.perf_counter()
        try:
            return await content.read(self.CHUNK_BYTES)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise _as_httpx(error) from error
        finally:
            if self._waited is not None:
                self._waited(start, time.perf_counter())

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while chunk := await self.next_piece():
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._response.__aexit__(None, None, None)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise _as_httpx(error) from error


def _as_httpx(error: aiohttp.ClientError | TimeoutError) -> httpx.TransportError:
    target = _mapped(error)
    assert target is not None  # both roots are in the table
    return target(str(error) or type(error).__name__)


def _header_text(value: bytes) -> str:
    # aiohttp writes header values as UTF-8: a value that is UTF-8 (as clients send non-ASCII text) goes out as
    # the same bytes; any other byte sequence is read as latin-1 and goes out re-encoded.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _payload(content: bytes) -> aiohttp.payload.BytesPayload:
    # aiohttp warns (ResourceWarning) about a bytes body over 1 MiB, "might lock the event loop": here the body is
    # already in memory, bounded by max_body_bytes, and the socket transport buffers it without blocking; the
    # BytesIO aiohttp suggests would be read in an executor thread, slower. The warning is silenced for this
    # synchronous constructor only.
    if len(content) <= aiohttp.payload.TOO_LARGE_BYTES_BODY:
        return aiohttp.payload.BytesPayload(content)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        return aiohttp.payload.BytesPayload(content)


@dataclass(slots=True)
class _Call:
    """What `_AbortableRequest` records of one call, for `_AiohttpUpstream`."""

    sockets: list[asyncio.Transport] = field(default_factory=list)
    """The sockets the request was sent on (see `_AiohttpUpstream` why)."""
    sent_at: float | None = None
    """`time.perf_counter()` when the request's head was written and its body was about to be."""


_CALL: contextvars.ContextVar[_Call] = contextvars.ContextVar("contextlift_upstream_call")


class _AbortableRequest(aiohttp.ClientRequest):
    """Records the socket a request is sent on, and when it went (`_Call`)."""

    async def send(self, conn: Any) -> Any:
        call = _CALL.get(None)
        if call is not None and conn.transport is not None:
            call.sockets.append(conn.transport)
        response = await super().send(conn)
        if call is not None:
            call.sent_at = time.perf_counter()
        return response

    async def write_bytes(self, *args: Any, **kwargs: Any) -> None:
        # aiohttp writes a body in a task of its own, started after `send` has returned (Python 3.11): the request
        # is on its way once that task runs, not before.
        call = _CALL.get(None)
        if call is not None:
            call.sent_at = time.perf_counter()
        await super().write_bytes(*args, **kwargs)


class _AiohttpUpstream(AiohttpTransport):
    """httpx-aiohttp's transport, its request call written out here: the body goes as a payload built without
    aiohttp's large-body warning (see `_payload`), a connection given up on is dropped rather than left to flush,
    an interim answer is refused, and errors are mapped by our rule."""

    times_itself = True
    """It times the waits `TimedTransport` would (`WAIT_EXTENSION`), from when the request went out."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        data: aiohttp.payload.Payload | httpx.AsyncByteStream | None
        try:
            data = _payload(request.content) if request.content else None
        except httpx.RequestNotRead:
            assert isinstance(request.stream, httpx.AsyncByteStream)
            data = request.stream
        response, body = await self._answer(request.method, request.url, request.headers.raw, data, request.extensions)
        extensions = {
            "http_version": b"HTTP/1.1",
            **({"reason_phrase": response.reason.encode()} if response.reason else {}),
        }
        return httpx.Response(
            status_code=response.status, headers=response.raw_headers, stream=body, request=request,
            extensions=extensions,
        )  # fmt: skip

    async def _answer(
        self,
        method: str,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        data: aiohttp.payload.Payload | httpx.AsyncByteStream | None,
        extensions: dict[str, Any],
    ) -> tuple[aiohttp.ClientResponse, _AiohttpBody]:
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        waited = extensions.get(WAIT_EXTENSION)
        start = time.perf_counter()
        timeout = extensions.get("timeout", {})
        call = _Call()
        token = _CALL.set(call)
        try:
            response = await self.client.request(
                method=method,
                url=_yarl_url(str(url)),
                # Names as the client cased them (a CIMultiDict of httpx.Headers would lowercase them all).
                headers=[(name.decode("latin-1"), _header_text(value)) for name, value in headers],
                data=data,
                allow_redirects=False,
                auto_decompress=False,
                compress=False,
                timeout=_client_timeout(timeout.get("connect"), timeout.get("read"), _acquire_bound(timeout)),
            ).__aenter__()
        except BaseException as error:
            # aiohttp closes a connection it gives up on (a timeout, a cancelled call) gracefully, which waits for
            # the body it queued to be flushed: an upstream that never reads would keep the socket and the whole
            # queued body for good. Nothing more will be read or written on it: drop it at once.
            for socket in call.sockets:
                socket.abort()
            if isinstance(error, aiohttp.ClientError | TimeoutError):  # aiohttp's errors, mapped by our rule
                raise _as_httpx(error) from error
            raise
        finally:
            _CALL.reset(token)
            if waited is not None:  # as `TimedTransport` times it
                waited(call.sent_at or start, time.perf_counter())
        if call.sent_at is not None:
            extensions[SENT_EXTENSION] = call.sent_at
        if response.status < 200:
            # An interim or 101 answer the proxy never asked for (it forwards no Upgrade, no Expect): relaying it
            # would hand the client a protocol switch or a headless stream.
            response.close()
            raise MalformedAnswer(f"upstream answered {response.status} to a request that asked for none")
        return response, _AiohttpBody(response, waited)


@functools.lru_cache(maxsize=64)
def _yarl_url(url: str) -> yarl.URL:
    """As httpx encoded it: yarl would otherwise re-normalise the query (`%2F` to `/`, `%40` to `@`). Kept for the
    few URLs every call uses (parsing one costs a few us). Without a base URL's user info: the call already carries
    it as Basic auth (`UpstreamClient.build_request`, as httpx's client sends it), and aiohttp refuses a URL with
    credentials beside an Authorization header."""
    parsed = yarl.URL(url, encoded=True)
    return parsed.with_user(None) if parsed.user is not None or parsed.password is not None else parsed


@functools.lru_cache(maxsize=16)
def _client_timeout(connect: float | None, read: float | None, acquire: float | None) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(sock_connect=connect, sock_read=read, connect=acquire)


def _acquire_bound(timeout: dict[str, float | None]) -> float | None:
    """aiohttp's `connect` bound: its wait for a free pooled connection and, when none is idle, the new one's whole
    set-up (resolving, TCP, TLS) together. As the pool wait alone (0.5 s) it cut a 1 s handshake short of the
    5 s connect timeout, a 502 the upstream did not cause. The proxy waits for a free slot itself, bounded by the
    pool wait (`UpstreamClient.reserve`), so here the two add up: the slot, then the set-up; the TCP connect
    alone stays bounded by `sock_connect`."""
    pool, connect = timeout.get("pool"), timeout.get("connect")
    return None if pool is None or connect is None else pool + connect


class _FreshConnector(aiohttp.TCPConnector):
    """aiohttp's connector, never reusing a pooled connection that holds unread bytes. aiohttp keeps reading an
    idle keep-alive connection; a late or stray answer written on it (a gateway's 408 before it closes, a
    duplicate response) would otherwise be read as the next request's answer, another client's. httpcore's pool
    checked every idle connection for this; here only the one about to be reused is checked."""

    async def _get(self, key: Any, traces: list[Any]) -> Any:
        while (connection := await super()._get(key, traces)) is not None:
            protocol = connection.protocol
            if protocol is not None and not protocol.should_close:
                return connection
            connection.close()
        return None


def build_transport(max_connections: int) -> httpx.AsyncBaseTransport:
    """The transport for the upstream client: aiohttp's pool of at most `max_connections`, under httpx's API."""

    def session() -> aiohttp.ClientSession:
        # Made on first use, inside the running loop, as aiohttp requires.
        made = aiohttp.ClientSession(
            # httpx's trust store (certifi), as the proxy always verified against.
            connector=_FreshConnector(limit=max_connections, limit_per_host=0, ssl=httpx.create_ssl_context()),
            cookie_jar=aiohttp.DummyCookieJar(),
            request_class=_AbortableRequest,
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
            # httpx's pool read answer heads of ~100 KB; aiohttp's defaults (8 KB a line, 128 headers) would refuse,
            # as a lost connection that is retried and billed, an upstream with one long header.
            max_line_size=MAX_HEAD_LINE_BYTES,
            max_field_size=MAX_HEAD_LINE_BYTES,
            max_headers=MAX_RESPONSE_HEADERS,
        )
        # aiohttp re-sends an idempotent request once, unseen, when a reused connection drops; the proxy counts and
        # retries its calls itself (and promises a relayed call is sent once). No public setting in aiohttp 3.14.
        if hasattr(made, "_retry_connection"):
            made._retry_connection = False
        return made

    return _AiohttpUpstream(client=session)


class _TimedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, waited: Callable[[float, float], None]) -> None:
        self._stream = stream
        self._waited = waited

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = aiter(self._stream)
        while True:
            start = time.perf_counter()
            try:
                piece = await anext(pieces)
            except StopAsyncIteration:
                return
            finally:
                self._waited(start, time.perf_counter())
            yield piece

    async def aclose(self) -> None:
        await self._stream.aclose()


class TimedTransport(httpx.AsyncBaseTransport):
    """Any transport, timing how long each request waits on the upstream: from when the request went out (where
    the transport says, `SENT_EXTENSION`; else from handing it to the transport) until the answer's head is in,
    then each wait for the next piece of the body. A request opts in with the `WAIT_EXTENSION` extension. What is
    timed includes the HTTP client's parsing of the answer but none of httpx's client-side work nor the proxy's:
    `X-Context-Overhead-Ms` is the request's time minus these waits."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner
        self._inner_times_itself = getattr(inner, "times_itself", False) is True

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        waited = request.extensions.get(WAIT_EXTENSION)
        if waited is None or self._inner_times_itself:
            return await self._inner.handle_async_request(request)
        start = time.perf_counter()
        try:
            response = await self._inner.handle_async_request(request)
        finally:
            # From when the request went out where the transport says (aiohttp's building and writing of it is the
            # proxy's time), else from handing it over.
            waited(request.extensions.get(SENT_EXTENSION, start), time.perf_counter())
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers.raw,
            stream=_TimedStream(response.stream, waited),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
