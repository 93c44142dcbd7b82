"""The connection protocol: uvicorn's h11 protocol with the limits a hostile client tests.

Why uvicorn's h11 protocol, subclassed (`uvicorn.Config(http=GuardedH11Protocol)`): h11 is a sans-IO parser that
already refuses most malformed requests (bad request lines, a missing or repeated `Host`, invalid header names or
values, conflicting `Content-Length` values, transfer codings other than `chunked`), reads one request at a time
and hands over each head as one event before the app sees it: the checks it lacks and the answers in the OpenAI
envelope go in one place, and uvicorn keeps the lifespan and connection bookkeeping the proxy relies on.
hypercorn or granian would replace the lifespan and shutdown machinery and still word their own answers to a
malformed request. httptools, uvicorn's faster parser (llhttp), was tried under the same guards on 2026-11-27:
1.65 ms added at p50 against h11's 1.91 and 18% more requests a core, every test of this layer passing; a hostile
review then found it parses every pipelined request in a read at once (a refusal or a 408 then lands inside an
earlier answer, mid-stream included, and queued requests grow memory without bound), skips the body of an
`Upgrade` or `CONNECT` request (which then runs as a request of its own), and merges chunked trailers into the
request's headers (`Authorization` included). Each needs a guard of its own; until they exist, h11.

What the protocol adds: a whole request head within `header_read_timeout` (from the connection's opening, or
from the first byte of a later head), else 408; a connection that never sends a byte closed silently, an idle
kept-alive one after `keepalive_timeout`; at most `max_connections` open, the next one 503 at once; heads up to
`max_header_bytes` and `max_header_count` however they are split, 431 above; every protocol error a 400
envelope, `Content-Length` with `Transfer-Encoding` included (RFC 9112 section 6.1: the body could hide a second
request), and a bare CR in a head at once rather than after the timeout; a client that leaves its answer unread
with the buffers full for `client_write_timeout` is dropped (its request ends as a 499), and an idle connection
whose last answer is still unread when its keep-alive ends is dropped rather than closed (a close waits for the
bytes to go). Every refusal closes the connection, after a short linger so the client can read the answer.
uvicorn's warnings about a connection (a malformed request, an unsupported upgrade) are each caused by a client,
one line per connection: at most one is written per `WARNING_INTERVAL`, saying how many were held back, so a
client cannot flood the log.
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from litestar.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from contextlift.proxy.errors import HeadersTooLarge, MalformedHTTP, Overloaded, ProxyError, RequestTimeout
from contextlift.proxy.request_log import RECEIVED_EXTENSION
from contextlift.proxy.settings import Settings

__all__ = ["GuardedConfig", "GuardedH11Protocol", "HttpLimits", "ThrottledWarnings"]

LINGER_SECONDS = 1.0
"""How long a refused connection stays half-open, reading and dropping what the client still sends. Closing a
socket with unread bytes sends a reset, which can destroy the answer before the client has read it."""

WARNING_INTERVAL = 60.0
"""Seconds between two of uvicorn's client-caused connection warnings in the log; those between are held back and
counted (at debug level, each still logged)."""

_HEAD_END = re.compile(rb"\n\r?\n")
_BARE_CR = re.compile(rb"\r[^\n]")


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What one connection may cost the server; the defaults are the settings' defaults."""

    header_read_timeout: float = 10.0
    keepalive_timeout: float = 5.0
    client_write_timeout: float = 60.0
    max_connections: int = 1024
    max_header_bytes: int = 32 * 1024
    max_header_count: int = 100

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpLimits:
        return cls(
            header_read_timeout=settings.header_read_timeout,
            keepalive_timeout=settings.keepalive_timeout,
            client_write_timeout=settings.client_write_timeout,
            max_connections=settings.max_connections,
            max_header_bytes=settings.max_header_bytes,
            max_header_count=settings.max_header_count,
        )


class GuardedConfig(uvicorn.Config):
    """uvicorn's config, carrying the limits to each connection's protocol."""

    def __init__(self, app: ASGIApp, limits: HttpLimits, **options: Any) -> None:
        super().__init__(app, http=GuardedH11Protocol, **options)
        self.http_limits = limits
        self.connection_log = ThrottledWarnings()
        """Shared by every connection of this server: the throttle is per process, not per connection."""


class ThrottledWarnings(logging.Logger):
    """uvicorn's connection logger (`uvicorn.error`, whose handlers its records reach), writing a warning at most
    once per `interval` and the ones between at debug level; the next warning written says how many were held
    back. Only warnings: uvicorn's errors are the app's own failures and are written as they come."""

    def __init__(self, interval: float = WARNING_INTERVAL) -> None:
        super().__init__("uvicorn.error")
        self._uvicorn = self.parent = logging.getLogger("uvicorn.error")
        self._interval = interval
        self._next_at = 0.0
        self._held = 0

    def isEnabledFor(self, level: int) -> bool:
        # Asked of uvicorn's logger each time: this one is outside logging's registry, whose level changes clear
        # the registered loggers' caches only.
        return self._uvicorn.isEnabledFor(level)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        now = time.monotonic()
        if now < self._next_at:
            self._held += 1
            self.debug(msg, *args, **kwargs)
            return
        self._next_at = now + self._interval
        if self._held:
            msg = f"{msg} (and {self._held} more client protocol warnings held back since the last one)"
            self._held = 0
        super().warning(msg, *args, **kwargs)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the limits of `HttpLimits` (see the module docstring)."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = config.http_limits if isinstance(config, GuardedConfig) else HttpLimits()
        self.logger = config.connection_log if isinstance(config, GuardedConfig) else ThrottledWarnings()
        self.conn: _StrictConnection = _StrictConnection(self.limits)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_seen = False  # bytes of the next head have arrived: its timeout answers 408, not just closes
        self._tail = b""  # the head's last bytes, to find a bare CR or the head's end split between two reads
        self._refused = False
        self._head_arrived: float | None = None  # time.perf_counter() of the next head's first byte
        self._write_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self.connections.discard(self)  # closing within LINGER_SECONDS; it must not crowd out the next one
            self._refuse(
                Overloaded(
                    f"the proxy is at its limit of {self.limits.max_connections} open connections; retry shortly",
                    headers={"retry-after": "1"},
                )
            )
            return
        self._start_head_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._stop_head_clock()
        self._stop_write_clock()

    def pause_writing(self) -> None:
        # The transport's buffer is past its high-water mark: the client is not reading what it was sent.
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.limits.client_write_timeout, self._write_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_write_clock()

    def timeout_keep_alive_handler(self) -> None:
        # An answer still unread in the buffer (below the high-water mark, so no write clock ran): closing would
        # wait for the client to read it, holding the connection's place for good.
        if not self.transport.is_closing() and self.transport.get_write_buffer_size():
            self.transport.abort()
            return
        super().timeout_keep_alive_handler()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after the answer: what the client still sends is dropped
        if self.conn.their_state is h11.IDLE:
            if self._head_arrived is None:
                self._head_arrived = time.perf_counter()
            self._head_seen = True
            if self._head_timer is None:
                self._start_head_clock()
            if self._bare_cr(data):
                self._refuse(MalformedHTTP("the request head has a bare CR; lines must end with CRLF"))
                return
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            if self._head_arrived is not None and self.scope is not None:
                # The app's task is created, not yet run: it reads when the request began (X-Context-Overhead-Ms).
                extensions = self.scope.setdefault("extensions", {})
                extensions[RECEIVED_EXTENSION] = {"at": self._head_arrived}
                self._head_arrived = None
            # A head is in (or the connection failed): the clock for the next head starts with its first byte.
            self._stop_head_clock()
            self._head_seen = False
            self._tail = b""
        elif self._head_timer is None and self.timeout_keep_alive_task is None and not self._refused:
            # Between two requests with no clock running: the rest of a body arrived after its answer was sent,
            # which uvicorn does not count as idle.
            self._start_idle_clock()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer to any h11.RemoteProtocolError; the connection recorded which one it was.
        self._refuse(self.conn.refusal or MalformedHTTP("the request is not valid HTTP/1.1"))

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # uvicorn has armed its keep-alive timer with its own setting, whole seconds; arm it with ours.
        if self.timeout_keep_alive_task is not None:
            self._start_idle_clock()

    def shutdown(self) -> None:
        if self._refused:
            self.transport.close()
            return
        super().shutdown()

    def response_started(self) -> bool:
        """A response is under way on this connection (the server cannot answer in its place any more)."""
        return self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete

    def _start_head_clock(self) -> None:
        self._stop_head_clock()
        self._head_timer = self.loop.call_later(self.limits.header_read_timeout, self._head_timed_out)

    def _start_idle_clock(self) -> None:
        """uvicorn's keep-alive timer (cancelled by uvicorn when data arrives), with our keepalive_timeout."""
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.limits.keepalive_timeout, self.timeout_keep_alive_handler
        )

    def _stop_head_clock(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _stop_write_clock(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_timed_out(self) -> None:
        """The client read nothing for `client_write_timeout`: drop the connection (closing would wait for the
        unread bytes to go); uvicorn then tells the app the client left, which ends the request as a 499."""
        self._write_timer = None
        self.logger.warning("A client stopped reading its answer; the connection was dropped.")
        self.transport.abort()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._refused or self.conn.their_state is not h11.IDLE:
            return
        if self._head_seen:
            timeout = self.limits.header_read_timeout
            self._refuse(RequestTimeout(f"the request head did not arrive within {timeout:g} s"))
        else:
            self.transport.close()

    def _bare_cr(self, data: bytes) -> bool:
        """A CR not followed by LF before the end of the head (h11 would wait for a line end forever)."""
        window = self._tail + data
        end = _HEAD_END.search(window)
        self._tail = window[-2:]
        return _BARE_CR.search(window, 0, len(window) if end is None else end.start()) is not None

    def _refuse(self, error: ProxyError) -> None:
        """Answer `error` in the OpenAI envelope and close the connection, whatever state h11 is in."""
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        self._stop_head_clock()
        self._unset_keepalive_if_required()
        self.transport.write(_error_response(error, self.server_state.default_headers))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self.flow.resume_reading()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


class _StrictConnection(h11.Connection):
    """h11's server side, refusing the request heads h11 lets through; `refusal` says why the last one failed."""

    def __init__(self, limits: HttpLimits) -> None:
        # h11 measures a head only while it is incomplete; complete ones are measured in _head_refusal.
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self.limits = limits
        self.refusal: ProxyError | None = None

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as error:
            if self.refusal is None:
                self.refusal = _protocol_refusal(error, self.limits)
            raise
        if isinstance(event, h11.Request):
            self.refusal = _head_refusal(event, self.limits)
            if self.refusal is not None:
                raise h11.RemoteProtocolError(self.refusal.message, self.refusal.status)
        return event


def _protocol_refusal(error: h11.RemoteProtocolError, limits: HttpLimits) -> ProxyError:
    if error.error_status_hint == 431:
        return HeadersTooLarge(f"the request head is larger than {limits.max_header_bytes} bytes")
    return MalformedHTTP(f"the request is not valid HTTP/1.1: {str(error)[:200]}")


def _head_refusal(event: h11.Request, limits: HttpLimits) -> ProxyError | None:
    if len(event.headers) > limits.max_header_count:
        return HeadersTooLarge(f"more than {limits.max_header_count} request headers")
    size = len(event.method) + len(event.target) + len(b"  HTTP/1.1\r\n\r\n")
    size += sum(len(name) + len(value) + len(b": \r\n") for name, value in event.headers.raw_items())
    if size > limits.max_header_bytes:
        return HeadersTooLarge(f"the request head is larger than {limits.max_header_bytes} bytes")
    names = {name for name, _ in event.headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        return MalformedHTTP("a request may not carry both Content-Length and Transfer-Encoding (RFC 9112, 6.1)")
    return None


def _error_response(error: ProxyError, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    body = json.dumps(error.envelope()).encode()
    headers = [
        *default_headers,
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *((name.encode(), value.encode()) for name, value in error.headers.items()),
    ]
    status = f"HTTP/1.1 {error.status} {http.HTTPStatus(error.status).phrase}".encode()
    return b"\r\n".join([status, *(name + b": " + value for name, value in headers), b"", body])
