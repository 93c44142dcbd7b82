"""The bounds a connection gets that uvicorn lacks, kept around its stock HTTP/1.1 protocol (h11), never inside it.

uvicorn parses, frames, pipelines and keeps connections alive as released; its settings bound an idle kept-alive
connection (`timeout_keep_alive`) and, through h11, a request head, a chunk line or a trailer section
(`h11_max_incomplete_event_size`). What no setting bounds is held here, by composition: `GuardedConnection` is the
asyncio protocol of a connection (`uvicorn.Config(http=GuardedConnection)`), passing every event to the stock
protocol it holds and using nothing of it but the asyncio `Protocol` interface:

- at most `max_connections` open, the next one answered 503 at once;
- a request head within `header_read_timeout` of its first byte (or of the connection's opening), else 408 and the
  connection closed; a connection that sends nothing is closed silently;
- a client that leaves its answer unread with the buffers full for `client_write_timeout` is dropped.

The protocol cannot see where a head ends; the app can: `ConnectionLink`, the outermost ASGI layer, tells the
connection a request of it has reached the app and when its answer has gone, and gives the request the
connection's `DELIVERED_EXTENSION` (the request log waits on it to tell a read answer from an unread one). The two
meet through a context variable the connection sets while the stock protocol reads its bytes: a request's task is
created there and copies it.

uvicorn's warnings about a connection (a malformed request) are each caused by a client: `ThrottledWarnings`, a
logging filter, lets one through per `WARNING_INTERVAL` and says how many it held back.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, cast

import uvicorn
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from contextlift.proxy.edge.admission import send_error
from contextlift.proxy.errors import HeadersTooLarge, MalformedHTTP, Overloaded, ProxyError, RequestTimeout
from contextlift.proxy.request_log import DELIVERED_EXTENSION, RECEIVED_EXTENSION
from contextlift.proxy.settings import Settings

__all__ = ["ConnectionLink", "GuardedConfig", "GuardedConnection", "HttpLimits", "ThrottledWarnings"]

LINGER_SECONDS = 1.0
"""How long a refused connection stays half-open, reading and dropping what the client still sends. Closing a
socket with unread bytes sends a reset, which can destroy the answer before the client has read it."""

WARNING_INTERVAL = 60.0
"""Seconds between two of uvicorn's client-caused connection warnings in the log; those between are held back and
counted."""

_CONNECTION: contextvars.ContextVar[GuardedConnection | None] = contextvars.ContextVar(
    "contextlift_connection", default=None
)


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

    @property
    def server_head_bytes(self) -> int:
        """h11's bound on a head (and a chunk line, a trailer section): twice the proxy's own, so that a head between
        the two reaches `ConnectionLink`, which answers it 431 in the envelope; past it uvicorn answers 400 itself."""
        return 2 * self.max_header_bytes


class GuardedConfig(uvicorn.Config):
    """uvicorn's config, serving HTTP/1.1 through `GuardedConnection` with `limits`."""

    def __init__(self, app: ASGIApp, limits: HttpLimits, **options: Any) -> None:
        super().__init__(
            app,
            http=GuardedConnection,
            timeout_keep_alive=limits.keepalive_timeout,  # type: ignore[arg-type]  # a float is used as given
            h11_max_incomplete_event_size=limits.server_head_bytes,
            **options,
        )
        self.http_limits = limits
        self.open_connections: set[GuardedConnection] = set()
        """Every open connection of this server, for the connection limit and the cut at the end of a drain."""


class GuardedConnection(asyncio.Protocol):
    """One connection: uvicorn's stock protocol inside, the bounds of `HttpLimits` around it."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        assert isinstance(config, GuardedConfig)
        self._stock = H11Protocol(config=config, server_state=server_state, app_state=app_state, _loop=_loop)
        self._limits = config.http_limits
        self._open = config.open_connections
        self._loop = _loop or asyncio.get_event_loop()
        self._context = contextvars.copy_context()
        self._context.run(_CONNECTION.set, self)
        self.transport: asyncio.Transport | None = None
        self._refused = False
        self._requests = 0  # requests of this connection in the app now (one, unless pipelined)
        self.responding = False  # an answer has started and not ended
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = False  # a byte has arrived since the last request reached the app
        self.head_at: float | None = None  # time.perf_counter() of that byte
        self._write_timer: asyncio.TimerHandle | None = None
        self._writable: asyncio.Future[bool] | None = None
        self.lost = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        if len(self._open) >= self._limits.max_connections:
            limit = self._limits.max_connections
            self._refuse(
                Overloaded(
                    f"the proxy is at its limit of {limit} open connections; retry shortly",
                    headers={"retry-after": "1"},
                )
            )
            return
        self._open.add(self)
        self._context.run(self._stock.connection_made, transport)
        self._start_head_clock()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering after the refusal: dropped unread
        if not self._requests and not self._head_bytes:
            self._head_bytes = True
            self.head_at = time.perf_counter()
            self._start_head_clock()
        self._context.run(self._stock.data_received, data)

    def eof_received(self) -> None:
        if not self._refused:
            self._stock.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._open.discard(self)
        self._stop_head_clock()
        self._stop_write_clock()
        if not self.lost.done():
            self.lost.set_result(None)
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(False)
        if not self._refused:
            self._stock.connection_lost(exc)

    def pause_writing(self) -> None:
        # The transport's buffer is past its high-water mark: the client is not reading what it was sent.
        if self._write_timer is None:
            self._write_timer = self._loop.call_later(self._limits.client_write_timeout, self._write_timed_out)
        if not self._refused:
            self._stock.pause_writing()

    def resume_writing(self) -> None:
        self._stop_write_clock()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(True)
        self._writable = None
        if not self._refused:
            self._stock.resume_writing()

    def shutdown(self) -> None:
        """At the start of a drain, as uvicorn asks of its own protocols: an idle connection closes now, a busy one
        after its answer."""
        if self._refused:
            return
        self._stock.shutdown()

    def request_started(self) -> None:
        """A request of this connection has reached the app: its head is in."""
        self._requests += 1
        self._head_bytes = False
        self.head_at = None
        self._stop_head_clock()

    def request_ended(self) -> None:
        """A request's answer has ended (or the app has returned). The next head's clock starts with its first
        byte; until then uvicorn's keep-alive timer bounds the idle connection."""
        self._requests -= 1
        self.responding = False

    async def delivered(self) -> bool:
        """Whether the whole answer, just written, left for the client: True once the transport's buffer is back
        under its high-water mark (at once when it never went over), False if the connection was lost first."""
        if self.lost.done():
            return False
        if self._write_timer is None:
            return True
        # The whole answer is written and sits unread: it gets the keep-alive time an idle connection gets, then the
        # connection is dropped (a close would wait for the client to read it, holding its place for good).
        self._write_timer.cancel()
        self._write_timer = self._loop.call_later(
            min(self._limits.keepalive_timeout, self._limits.client_write_timeout), self._write_timed_out
        )
        if self._writable is None:
            self._writable = self._loop.create_future()
        return await asyncio.shield(self._writable)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _start_head_clock(self) -> None:
        self._stop_head_clock()
        self._head_timer = self._loop.call_later(self._limits.header_read_timeout, self._head_timed_out)

    def _stop_head_clock(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _stop_write_clock(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._requests or self.transport is None or self.transport.is_closing():
            return
        if self._head_bytes:
            timeout = self._limits.header_read_timeout
            self._refuse(RequestTimeout(f"the request head did not arrive within {timeout:g} s"))
        else:
            self.transport.close()  # nothing sent: closed without a word

    def _write_timed_out(self) -> None:
        """The client read nothing for `client_write_timeout`: drop the connection (closing would wait for the
        unread bytes to go); the stock protocol then tells the app the client left."""
        self._write_timer = None
        logging.getLogger("uvicorn.error").warning("A client stopped reading its answer; the connection was dropped.")
        self.abort()

    def _refuse(self, error: ProxyError) -> None:
        """Answer `error` in the OpenAI envelope and close the connection, whatever the stock protocol is doing:
        what the client sends meanwhile is read and dropped for `LINGER_SECONDS`."""
        assert self.transport is not None
        self._refused = True
        self._stop_head_clock()
        self.transport.write(_error_response(error))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._loop.call_later(LINGER_SECONDS, self.transport.close)


class ConnectionLink:
    """The app as the server runs it: tells the request's connection that the request reached the app and when its
    answer ended, and hands the request the connection's extensions: when its head's first byte came
    (`RECEIVED_EXTENSION`) and whether its answer left (`DELIVERED_EXTENSION`). A route learns of a client's hang-up
    from `receive`, as under any server: uvicorn stops reading a connection once 64 KiB of body is buffered and
    reads on only when the app asks for more, so a future set at the connection's loss could miss a client that
    hangs up after a large body."""

    def __init__(self, app: ASGIApp, limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _CONNECTION.get()
        if scope["type"] != ScopeType.HTTP or connection is None:
            await self.app(scope, receive, send)
            return
        extensions = scope.setdefault("extensions", {})
        assert extensions is not None
        if connection.head_at is not None:
            extensions[RECEIVED_EXTENSION] = {"at": connection.head_at}
        extensions[DELIVERED_EXTENSION] = {"wait": connection.delivered}
        connection.request_started()
        refusal = self._head_refusal(list(scope["headers"]))
        if refusal is not None:
            try:
                await send_error(send, refusal)
            finally:
                connection.request_ended()
            return
        body_left = any(name in _FRAMING for name, value in scope["headers"] if value.strip() != b"0")

        async def tracked_receive() -> ReceiveMessage:
            nonlocal body_left
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_left = False
            return message

        async def linked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                connection.responding = True
                if body_left:
                    # Answered before its body was read (a 404, a 413): the connection closes after the answer,
                    # rather than wait for the rest of a body nobody reads (h11 would read it as the next request's
                    # prelude).
                    message["headers"] = [*message.get("headers", ()), (b"connection", b"close")]
            await send(message)

        try:
            await self.app(scope, tracked_receive, linked_send)
        finally:
            connection.request_ended()

    def _head_refusal(self, headers: list[tuple[bytes, bytes]]) -> ProxyError | None:
        """What h11 leaves to the server in a head it read: the count and size of its headers, and a body framed
        two ways."""
        if len(headers) > self.limits.max_header_count:
            return HeadersTooLarge(f"more than {self.limits.max_header_count} request headers", headers=_CLOSE)
        if sum(len(name) + len(value) for name, value in headers) > self.limits.max_header_bytes:
            return HeadersTooLarge(f"request headers larger than {self.limits.max_header_bytes} bytes", headers=_CLOSE)
        if sum(name in _FRAMING for name, _ in headers) > 1:
            # h11 reads such a body by its Transfer-Encoding and goes on to the next request on the connection; a
            # front proxy that read it by its Content-Length would not see that request (RFC 9112 6.1: the server
            # must close the connection after answering).
            return MalformedHTTP(
                "a request may carry one Content-Length or Transfer-Encoding header, not both (RFC 9112, 6.1)",
                headers=_CLOSE,
            )
        return None


class ThrottledWarnings(logging.Filter):
    """On uvicorn's connection logger (`uvicorn.error`): a warning at most once per `interval`; the next one let
    through says how many were held back. Only warnings: uvicorn's errors are the app's own failures."""

    def __init__(self, interval: float = WARNING_INTERVAL) -> None:
        super().__init__()
        self._interval = interval
        self._next_at = 0.0
        self._held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        now = time.monotonic()
        if now < self._next_at:
            self._held += 1
            return False
        self._next_at = now + self._interval
        if self._held:
            record.msg = (
                f"{record.getMessage()} (and {self._held} more client protocol warnings held back since the last one)"
            )
            record.args = ()
            self._held = 0
        return True


def _error_response(error: ProxyError) -> bytes:
    """A whole HTTP/1.1 answer written before or beside the stock protocol, which has no way to send one of ours:
    the connection's limit reached, or its head's deadline passed while the parser waited."""
    body = json.dumps(error.envelope()).encode()
    lines = [
        f"HTTP/1.1 {error.status} {_PHRASES.get(error.status, 'Error')}".encode(),
        b"content-type: application/json",
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
        *(f"{name}: {value}".encode("latin-1") for name, value in error.headers.items()),
    ]
    return b"\r\n".join([*lines, b"", body])


_CLOSE = {"connection": "close"}
_FRAMING = frozenset({b"content-length", b"transfer-encoding"})
_PHRASES = {408: "Request Timeout", 503: "Service Unavailable"}
