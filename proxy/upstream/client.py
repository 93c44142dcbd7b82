"""The upstream client: one pooled transport for the configured base URL, shared by every request
(`contextlift.proxy.upstream.request` is one request's view of it).

Calls are httpx requests and responses, sent to the transport directly rather than through `httpx.AsyncClient`:
the client's per-call machinery (the URL parsed and merged and the headers merged for every call, then auth and
redirect handling and a cookie jar that reads every answer, only to store nothing) cost several times what this
does (docs/performance.md), for features the proxy turns off. What the client did that matters
is done here: its default headers in its order (`_CLIENT_HEADERS`), the timeouts, a base URL's user info as Basic
auth; no cookie is stored.

The base URL comes from settings only; nothing in a request can change where calls go. Redirects are never
followed (that would send the operator's key to wherever the upstream points) and never relayed either (a client
SDK would follow it and send the prompt there, around the proxy): a 3xx redirect is the proxy's 502.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog

from contextlift.proxy.budget import Lease
from contextlift.proxy.errors import UpstreamPoolExhausted, UpstreamProtocolError, UpstreamRedirected
from contextlift.proxy.upstream.answers import WAIT_EXTENSION, RawAnswer
from contextlift.proxy.upstream.bodies import ACCEPT_ENCODING, read_whole
from contextlift.proxy.upstream.headers import forwarded_headers, header_bytes, unwritable_answer
from contextlift.proxy.upstream.key_guard import KeyGuard
from contextlift.proxy.upstream.retry import RetryPolicy
from contextlift.proxy.upstream.transport import TimedTransport
from contextlift.proxy.upstream.transport_errors import mapped_transport_errors

_CLIENT_HEADERS = (
    (b"Accept", b"*/*"),
    (b"Connection", b"keep-alive"),
    (b"User-Agent", f"python-httpx/{httpx.__version__}".encode()),
    (b"accept-encoding", ACCEPT_ENCODING.encode()),
)
"""The headers httpx's client added to every call, in its order, each one the client's own header replaces."""
_KEPT_URLS = 32

REDIRECTS = frozenset(range(300, 400)) - {304}
"""Every 3xx but 304 (Not Modified, the answer to a client's own conditional request, relayed as it is)."""
log = structlog.get_logger("contextlift")


@dataclass(frozen=True, slots=True)
class Verbatim:
    """A client's chat body as it arrived (already checked to be strict JSON) and as parsed."""

    raw: bytes
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Fetched:
    """An upstream answer read whole: its status, headers and decoded body."""

    status_code: int
    headers: httpx.Headers
    body: bytes


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
        pool_wait: float = 10.0,
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
        self.pool_wait = pool_wait
        self.retry = retry or RetryPolicy()
        self.stream_limits = stream_limits or StreamLimits(stall_seconds=timeout)
        self._slots = asyncio.Semaphore(max_connections)
        pool = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        # A wait for a free pooled connection that runs out is the proxy's (UpstreamPoolExhausted), not the
        # upstream's; `reserve` already waited for a slot, so this one is rarely reached.
        self._timeouts = httpx.Timeout(timeout, connect=connect_timeout, pool=pool_wait).as_dict()
        self._transport = TimedTransport(transport or httpx.AsyncHTTPTransport(limits=pool))
        # The credentials of a base URL's user info, sent as Basic auth as httpx's client sends them.
        self._url_auth = httpx.BasicAuth(base.username, base.password) if base.username or base.password else None
        self._urls: dict[str, httpx.URL] = {}

    def url(self, path: str) -> str:
        """Absolute upstream URL of a path below the base URL (`chat/completions`, `models` ...)."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def forwarded(self, inbound_headers: Mapping[str, str]) -> httpx.Headers:
        """A client's headers as they go upstream (see `forwarded_headers`)."""
        return forwarded_headers(inbound_headers, self.api_key, self.key_header)

    def guard(self, forwarded: Mapping[str, str]) -> KeyGuard:
        """The guard of the key these forwarded headers carry."""
        return KeyGuard.for_headers(forwarded, self.key_header)

    async def reserve(self) -> None:
        """Wait until one of the pool's connections is this call's. The wait happens inside the proxy (many
        requests, or a fan-out, want more connections than the pool has), so it has its own short bound
        (`pool_wait`), is never counted in the upstream timeout, and running out is the proxy's 503, never the
        upstream's 504: a client learns at once that the pool is full rather than after minutes.
        Every `reserve` is paired with one `release` when the call's response is closed.

        Raises:
            UpstreamPoolExhausted: no connection came free within `pool_wait`.
        """
        if not self._slots.locked():
            await self._slots.acquire()  # free: taken at once, without a timer
            return
        try:
            async with asyncio.timeout(self.pool_wait):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamPoolExhausted(
                f"no upstream connection came free within {self.pool_wait:g} s (upstream_max_connections, "
                "upstream_pool_wait); retry shortly",
                headers={"retry-after": "1"},
            ) from None

    def release(self) -> None:
        self._slots.release()

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send a prepared request, streaming the response; the caller reserved a connection and closes it.

        Raises:
            UpstreamRedirected: the upstream answered a 3xx redirect (closed here, neither followed nor relayed).
            UpstreamProtocolError: an interim (1xx) answer reached here, which the proxy never asks for, or an
                answer the proxy could not write to its client (`unwritable_answer`).
            UpstreamError: the upstream could not be reached, or failed before answering.
        """
        with mapped_transport_errors("before answering"):
            response = await self._transport.handle_async_request(request)
        response.request = request
        if _refused(response.status_code):
            await response.aclose()
            _refuse(response.status_code, response.headers)
        fault = unwritable_answer(response.status_code, response.headers)
        if fault is not None:
            await response.aclose()
            raise UpstreamProtocolError(f"upstream answered with {fault}, which the proxy cannot relay to a client")
        return response

    async def fetch(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
        params: str | None = None,
        waited: Callable[[float, float], None] | None = None,
        lease: Lease | None,
        deadline: float,
    ) -> Fetched:
        """Make the call `build_request` describes and read its answer whole (decoded, bounded, charged to
        `lease`), the connection given back; the caller reserved it: what `send`, `read` and closing the response
        do together.

        Raises:
            UpstreamRedirected, UpstreamProtocolError, UpstreamError: as `send` and `read` raise them.
        """
        request = self.build_request(method, path, headers=headers, content=content, params=params, waited=waited)
        answer = RawAnswer.of(await self.send(request))  # refused answers refused (and closed) there
        try:
            body = await self._read_whole(answer, lease, deadline)
        finally:
            await answer.aclose()
        return Fetched(answer.status_code, answer.headers, body)

    def deadline(self) -> float:
        """`time.monotonic()` by which an attempt starting now must be complete."""
        return time.monotonic() + self.stream_limits.deadline_seconds

    async def read(self, response: httpx.Response, lease: Lease | None, deadline: float) -> bytes:
        """A response's whole body, decoded, bounded, charged to `lease`."""
        return await self._read_whole(RawAnswer.of(response), lease, deadline)

    async def _read_whole(self, answer: RawAnswer, lease: Lease | None, deadline: float) -> bytes:
        limits = self.stream_limits
        with mapped_transport_errors("while answering", answered=True):
            return await read_whole(
                answer, max_bytes=limits.max_body_bytes, stall_seconds=self.timeout, deadline=deadline, lease=lease
            )

    def build_request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        content: bytes | None = None,
        params: str | None = None,
        waited: Callable[[float, float], None] | None = None,
    ) -> httpx.Request:
        """A request to `path` below the base URL, with the base URL's query and then the client's; `waited` is
        told each time the upstream held it (see `TimedTransport`)."""
        url, raw = self._url_and_headers(method, path, headers, content, params)
        # httpx's `content=` path (encode the body, then merge its headers one `setdefault` at a time, re-reading
        # every header's encoding each time) was most of a call's cost; the same headers are put here in its order.
        request = httpx.Request(
            method, url, headers=raw, stream=httpx.ByteStream(content or b""), extensions=self._extensions(waited)
        )
        request.read()
        if self._url_auth is not None:
            next(self._url_auth.sync_auth_flow(request))  # sets Authorization, as httpx's client does
        return request

    def _url_and_headers(
        self, method: str, path: str, headers: Mapping[str, str], content: bytes | None, params: str | None
    ) -> tuple[httpx.URL, list[tuple[bytes, bytes]]]:
        """A call's URL and every header it sends, in order, as httpx's client sent them: its own defaults first,
        each replaced by the caller's header of that name, and the body's framing where httpx puts it."""
        merged = self.base_params.merge(httpx.QueryParams(params)) if params else self.base_params
        url = self._url_of(path) if not merged else httpx.URL(self._url_of(path), params=merged)
        # As bytes: the server decoded the client's header values as latin-1, and httpx would encode a str value
        # as ASCII and fail (a 500) on any other byte a client may legally send.
        if isinstance(headers, httpx.Headers):  # `forwarded`: every line, a repeated name included
            raw = list(headers.raw)
        else:
            raw = [(name.encode("latin-1"), header_bytes(value)) for name, value in headers.items()]
        named = {name.lower() for name in headers}
        raw = [header for header in _CLIENT_HEADERS if header[0].decode().lower() not in named] + raw
        return url, _with_framing(raw, named, method, url, content)

    def _extensions(self, waited: Callable[[float, float], None] | None) -> dict[str, Any]:
        extensions: dict[str, Any] = {"timeout": self._timeouts}
        if waited is not None:
            extensions[WAIT_EXTENSION] = waited
        return extensions

    def _url_of(self, path: str) -> httpx.URL:
        """The parsed URL of `path` below the base URL: parsed once for the few paths every request uses (a path is
        the client's own on the pass-through routes, so only the first few are kept)."""
        url = self._urls.get(path)
        if url is None:
            url = httpx.URL(self.url(path))
            if len(self._urls) < _KEPT_URLS:
                self._urls[path] = url
        return url

    async def reachable(self, probe_seconds: float = 3.0) -> bool:
        """Whether the upstream answers HTTP at all (an auth error still means reachable)."""
        request = self.build_request("GET", "models", headers=self.forwarded({}))
        request.extensions["timeout"] = httpx.Timeout(probe_seconds).as_dict()
        try:
            # Closed unread: the status is all a probe needs, and a body could be a bomb.
            response = await self._transport.handle_async_request(request)
            await response.aclose()
        except httpx.HTTPError:
            return False
        return response.status_code < 500

    async def aclose(self) -> None:
        await self._transport.aclose()


def _refused(status: int) -> bool:
    return status < 200 or status in REDIRECTS


def _refuse(status: int, headers: httpx.Headers) -> NoReturn:
    """Raise for an answer the proxy never relays: an interim one, or a redirect (logged, its target trimmed)."""
    if status < 200:
        raise UpstreamProtocolError(f"upstream answered {status} to a request that asked for none")
    location = _logged_location(headers.get("location", ""))
    log.warning("upstream redirect refused", status=status, location=location)
    raise UpstreamRedirected(
        f"upstream answered {status}, a redirect; the proxy neither follows nor relays redirects (check upstream_url)"
    )


def _logged_location(location: str) -> str:
    """A redirect's target as the log shows it: scheme, host and path. Its query and fragment (a sign-in's
    `?token=`, an OAuth `#access_token=`) and any user info can carry a credential, and logs travel far."""
    try:
        parts = urlsplit(location)
    except ValueError:  # an unbalanced IPv6 bracket: nothing of it is shown
        return "(not a URL)"
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _with_framing(
    raw: list[tuple[bytes, bytes]], named: set[str], method: str, url: httpx.URL, content: bytes | None
) -> list[tuple[bytes, bytes]]:
    """`raw` with the headers `httpx.Request(content=...)` adds, where it adds them: a body's Content-Length after
    the others, then Host (and an empty POST's, PUT's or PATCH's `Content-Length: 0`) before them all."""
    tail = [(b"Content-Length", str(len(content)).encode())] if content and "content-length" not in named else []
    head = [] if "host" in named or not url.host else [(b"Host", url.netloc)]
    framed = tail or "content-length" in named or "transfer-encoding" in named
    if not framed and method in ("POST", "PUT", "PATCH"):
        head.append((b"Content-Length", b"0"))
    return head + raw + tail
