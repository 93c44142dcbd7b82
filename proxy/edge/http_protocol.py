"""The connection protocol: uvicorn's httptools protocol with the limits a hostile client tests.

Why uvicorn's httptools protocol, subclassed (`uvicorn.Config(http=GuardedHttpProtocol)`): httptools wraps
llhttp, Node's C parser, which in its strict default refuses malformed requests (bad request lines, invalid header
names or values, obsolete line folding, duplicate or negative `Content-Length`, request transfer codings that do
not end in `chunked`), and calls back per header and once the head is complete, before uvicorn starts the app:
the checks it lacks go in those callbacks, the answers in the OpenAI envelope in one place, and uvicorn keeps the
lifespan and connection bookkeeping the proxy relies on. It replaced uvicorn's h11 protocol (a pure-Python
parser, 29% of the proxy's samples under load) for its speed (docs/performance.md has the figures side by side).
hypercorn or granian would replace the lifespan and shutdown machinery and still word their own answers to a
malformed request.

What llhttp does not do, and this protocol does, each found by a hostile review of an httptools build:
- One request at a time. llhttp parses every request in a read at once; uvicorn queued the pipelined ones without
  bound and a refusal of a later one landed inside an earlier answer. Here a request that begins before the answer
  to the one before it is complete is not read at all (its bytes and all after them are dropped), and the
  connection closes once that answer is out. No client the proxy serves pipelines.
- No protocol switch. A request llhttp reads as an upgrade (`Connection: upgrade` with `Upgrade`, or `CONNECT`)
  has its body skipped by the parser, which would run it as a request of its own: `CONNECT`, and an upgrade that
  declares a body, are refused; a body-less upgrade offer is answered as plain HTTP/1.1 (as RFC 9110 section 7.8
  allows) and the connection closes after the answer, nothing after the head read.
- Trailers are dropped, and bounded: llhttp reports a chunked body's trailer fields as headers, which uvicorn
  added to the request's own (a trailer `Authorization` replaced the head's). Trailer fields past
  `max_header_bytes` in all, or that many bytes read in the body phase with no body data among them (chunk
  lines, extensions), drop the connection; a trailer's `Connection: close` closes it after the answer (the parser
  drops what follows unread).
- The request line: llhttp reads one without a version as HTTP/0.9 and still parses its headers and body, and
  uvicorn keeps only the path of an absolute-form target: anything but HTTP/1.1 and HTTP/1.0, and any target
  that is not a path and query, is refused. `Host`: exactly one on HTTP/1.1, at most one on HTTP/1.0 (RFC 9112
  section 3.2).
- A head is measured from its first byte, blank lines before it included (never taken for its end). The read
  that ends a body whose answer is already out (a 404 before the body came) may hold the client's next request:
  where the body has a `Content-Length`, the head is measured from the byte after it and served; after a chunked
  body, whose end only the parser knows, or one the client was to send after a 100 Continue (it may never come),
  the connection closes after the answer instead. The rest of a body that
  its answer did not wait for has `keepalive_timeout` in all, not per byte.

And what the proxy always guarded: a whole request head within `header_read_timeout` (from the connection's
opening, or from the first byte of a later head), else 408; a connection that never sends a byte closed silently,
an idle kept-alive one after `keepalive_timeout`; at most `max_connections` open, the next one 503 at once; heads
up to `max_header_bytes` and `max_header_count` however they are split, 431 above (a head's bytes counted as they
arrive: httptools gathers a header's value whole before calling back); every protocol error a 400 envelope,
`Content-Length` with `Transfer-Encoding` included (RFC 9112 section 6.1: the body could hide a second request),
and a bare CR in a head at once rather than after the timeout; a client that leaves its answer unread with the
buffers full for `client_write_timeout` is dropped (its request ends as a 499), and an idle connection whose last
answer is still unread when its keep-alive ends is dropped rather than closed (a close waits for the bytes to go).
Every refusal closes the connection, after a short linger so the client can read the answer. uvicorn's warnings
about a connection (a malformed request, an unsupported upgrade) are each caused by a client, one line per
connection: at most one is written per `WARNING_INTERVAL`, saying how many were held back, so a client cannot
flood the log.
"""

from __future__ import annotations

import asyncio
import enum
import http
import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any, cast

import httptools
import uvicorn
from litestar.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from contextlift.proxy.errors import HeadersTooLarge, MalformedHTTP, Overloaded, ProxyError, RequestTimeout
from contextlift.proxy.request_log import BODY_EXTENSION, GONE_EXTENSION, RECEIVED_EXTENSION
from contextlift.proxy.settings import Settings

__all__ = ["GuardedConfig", "GuardedHttpProtocol", "HttpLimits", "ThrottledWarnings"]

LINGER_SECONDS = 1.0
"""How long a refused connection stays half-open, reading and dropping what the client still sends. Closing a
socket with unread bytes sends a reset, which can destroy the answer before the client has read it."""

WARNING_INTERVAL = 60.0
"""Seconds between two of uvicorn's client-caused connection warnings in the log; those between are held back and
counted (at debug level, each still logged)."""

_HEAD_END = re.compile(rb"\n\r?\n")
_INTERIM = b"HTTP/1.1 1"
"""An interim answer's status line: uvicorn writes `100 Continue` through the cycle's transport."""
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
        super().__init__(app, http=GuardedHttpProtocol, **options)
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


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of `HttpLimits` (see the module docstring)."""

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
        self._reading = _Reading.IDLE
        self._refusal: ProxyError | None = None  # why the head being read is refused, set by a parser callback
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._header_count = 0
        self._hosts = 0
        self._framing: dict[bytes, bytes] = {}  # content-length / transfer-encoding, as the head named them
        self._tail = b""  # the head's last bytes, to find a bare CR or the head's end split between two reads
        self._refused = False
        self._last = False  # nothing after the request being read is read: the connection closes after its answer
        self._ignoring = False  # a request began before the last answer was out: what follows is dropped
        self._since_data = 0  # bytes of the body phase read since its last data: chunk lines, trailers
        self._trailer_bytes = 0
        self._trailers_too_large = False
        self._head_started = False  # a byte other than the blank lines a head may follow has arrived
        self._body_left: int | None = 0  # bytes of a Content-Length body still to come; None for a chunked one
        self._next_head = False  # the read that ends a body answered early holds the next head: measured from its start
        self._leftover_timer: asyncio.TimerHandle | None = None  # a body still owed after its answer went
        self._head_arrived: float | None = None  # time.perf_counter() of the next head's first byte
        self._write_timer: asyncio.TimerHandle | None = None
        self._gone: asyncio.Future[None] | None = None  # the request's GONE_EXTENSION
        self._body: dict[object, object] | None = None  # the request's BODY_EXTENSION, until its body is whole

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
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)
        self._stop_head_clock()
        self._stop_write_clock()
        self._stop_leftover_clock()

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
        if self._refused or self._ignoring:
            return  # lingering after the answer, or after a request that came too early: dropped unread
        if self._reading is _Reading.IDLE:
            if self._last or self._answer_pending():
                self._read_no_more()
                return
            self._reading = _Reading.HEAD
            self._head_arrived = time.perf_counter()
            if self._head_timer is None:
                self._start_head_clock()
        if self._reading is _Reading.HEAD and self._head_refused(data):
            return
        if self._reading is _Reading.BODY:
            self._since_data += len(data)
            if self._body_left is not None and len(data) > self._body_left and self._answered():
                # The body's last bytes and a head after them, the body's answer already out (a 404 before the
                # body came): that head is the client's next request, measured from its first byte.
                self._next_head = True
                self._head_arrived = time.perf_counter()
                self._start_head_clock()
                if self._head_refused(data[self._body_left :]):
                    return
        # uvicorn's own data_received, but a parser error is answered with what the parser said.
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._last = True  # the parser stopped at the head: what follows it is never read
        except httptools.HttpParserError as error:
            if self._trailers_too_large:
                self.logger.warning("A chunked body's trailers passed their bound; the connection was dropped.")
                self.transport.abort()
                return
            if self._ignoring or (self._reading is _Reading.IDLE and self._answer_pending()):
                self._read_no_more()  # the error is in bytes after a whole request: they are dropped unanswered
                return
            self.logger.warning("Invalid HTTP request received.")
            detail = f"the request is not valid HTTP/1.1: {str(error)[:200]}"
            self._refuse(self._refusal or MalformedHTTP(detail))
            return
        if self._reading is _Reading.BODY and self._since_data > self.limits.max_header_bytes:
            self.logger.warning("A chunked body's chunk lines and trailers passed their bound; connection dropped.")
            self.transport.abort()
            return
        if (
            self._reading is _Reading.IDLE
            and self._head_timer is None
            and self.timeout_keep_alive_task is None
            and not self._answer_pending()
        ):
            # Between two requests with no clock running: the rest of a body arrived after its answer was sent
            # (uvicorn stops the keep-alive clock whenever bytes arrive).
            self._start_idle_clock()

    def on_message_begin(self) -> None:
        if self._next_head and not self._answer_pending():
            self._next_head = False
            self._reading = _Reading.HEAD
        if self._ignoring or self._last or self._reading is not _Reading.HEAD:
            # It begins in the bytes that ended the request before it, before that request's answer was out:
            # pipelined, or measured from no first byte. It is not read.
            self._read_no_more()
            return
        super().on_message_begin()
        self._header_count = 0
        self._hosts = 0
        self._framing = {}
        if self._head_timer is None:
            self._start_head_clock()

    def on_url(self, url: bytes) -> None:
        if not self._ignoring:
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        # An exception here ends the parse: data_received answers self._refusal.
        if self._ignoring:
            return
        if self._reading is _Reading.BODY:  # a trailer field: counted, never joined to the request's headers
            self._trailer_bytes += len(name) + len(value) + 4
            if self._trailer_bytes > self.limits.max_header_bytes:
                self._trailers_too_large = True
                raise HeadersTooLarge(f"the request's trailers are larger than {self.limits.max_header_bytes} bytes")
            return
        self._header_count += 1
        if self._header_count > self.limits.max_header_count:
            self._refusal = HeadersTooLarge(f"more than {self.limits.max_header_count} request headers")
            raise self._refusal
        lowered = name.lower()
        if lowered in (b"content-length", b"transfer-encoding"):
            self._refusal = _framing_refusal(lowered, value, self._framing)
            if self._refusal is not None:
                raise self._refusal
            self._framing[lowered] = value
        elif lowered == b"host":
            self._hosts += 1
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._ignoring:
            return
        self._refusal = self._head_refusal()
        if self._refusal is not None:
            raise self._refusal
        if self.scope is not None:
            # Before the app's task is created: when the request began (X-Context-Overhead-Ms), and a future done
            # when the connection is lost (a route waits on it with a callback rather than a task reading receive).
            extensions = self.scope.setdefault("extensions", {})
            if self._head_arrived is not None:
                extensions[RECEIVED_EXTENSION] = {"at": self._head_arrived}
                self._head_arrived = None
            self._gone = self.loop.create_future()
            extensions[GONE_EXTENSION] = {"future": self._gone}
            self._body = {"whole": False}
            extensions[BODY_EXTENSION] = self._body
        self._reading = _Reading.BODY
        self._since_data = self._trailer_bytes = 0
        length = self._framing.get(b"content-length")
        self._body_left = None if b"transfer-encoding" in self._framing else int(length or 0)
        # A head is in: the clock for the next head starts with its first byte.
        self._stop_head_clock()
        self._head_bytes = 0
        self._head_started = False
        self._tail = b""
        super().on_headers_complete()
        if self.cycle is not None:
            self.cycle.transport = cast(asyncio.Transport, _HeadWithBody(self.transport, self.loop))
        if self.parser.should_upgrade():
            self._last = True  # a body-less upgrade offer, answered as plain HTTP/1.1: nothing after its head is read

    def on_body(self, body: bytes) -> None:
        if self._ignoring:
            return
        self._since_data = 0
        if self._body_left is not None:
            self._body_left -= len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._ignoring:
            return
        self._stop_leftover_clock()
        super().on_message_complete()
        if self._body is not None:
            self._body["whole"] = True
            self._body = None
        # uvicorn stops reading once 64 KiB of body is buffered, until the app next calls `receive`; the route
        # waits on the lost-connection future instead, so a client hanging up after a large body went unseen
        # until the answer (its upstream call ran on for up to upstream_timeout). What arrives now is the
        # connection's end, or a request too early, dropped unread.
        self.flow.resume_reading()
        self._reading = _Reading.IDLE
        if not self.parser.should_keep_alive():
            # HTTP/1.0, or `Connection: close` (a trailer's too: the parser then drops what follows unread).
            self._last = True

    def on_response_complete(self) -> None:
        self._flush_head()
        if self._last or self._ignoring:
            self._close_after_answer()
            return
        super().on_response_complete()
        # uvicorn has armed its keep-alive timer with its own setting, whole seconds; arm it with ours.
        if self.timeout_keep_alive_task is not None:
            self._start_idle_clock()
        if self._reading is _Reading.BODY and not self.transport.is_closing():
            # Answered before its body was all read (a 404, a 413).
            if self._body_left is None or self.expect_100_continue:
                # Chunked: where its end falls in a read is the parser's to know, so a head after it could not be
                # measured from its first byte. Expect: 100-continue: the client may now never send the body
                # (RFC 9110, 10.1.1), and its next request would be read as the body's bytes. Either way the
                # connection ends after the answer; the client's pool sees it.
                self._close_after_answer()
                return
            # uvicorn's clocks stop at every byte: the rest of it has `keepalive_timeout` in all, not per byte.
            self._stop_leftover_clock()
            self._leftover_timer = self.loop.call_later(self.limits.keepalive_timeout, self.transport.close)

    def shutdown(self) -> None:
        self._flush_head()
        if self._refused:
            self.transport.close()
            return
        super().shutdown()

    def _flush_head(self) -> None:
        """A head held for its body goes out now: before anything else is written or the connection closes."""
        if self.cycle is not None and isinstance(self.cycle.transport, _HeadWithBody):
            self.cycle.transport.flush()

    def response_started(self) -> bool:
        """A response is under way on this connection (the server cannot answer in its place any more)."""
        return self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete

    def _answered(self) -> bool:
        """The request being read has had its whole answer."""
        return self.cycle is not None and self.cycle.response_complete

    def _answer_pending(self) -> bool:
        """A whole request has been read and its answer is not all out yet."""
        return self.cycle is not None and not self.cycle.response_complete

    def _read_no_more(self) -> None:
        """A request began before the answer to the one before it was out: neither it nor anything after it is
        read (what arrives is dropped), and the connection closes once that answer is out."""
        self._ignoring = True
        self._stop_head_clock()
        if self._answered():
            self._close_after_answer()

    def _close_after_answer(self) -> None:
        """Close as a refusal does, once the answer is out (see `_linger_then_close`)."""
        self._ignoring = True
        self._unset_keepalive_if_required()
        if not self.transport.is_closing():
            self._linger_then_close()

    def _linger_then_close(self) -> None:
        """End of stream after what was written, and what the client still sends read and dropped for
        `LINGER_SECONDS` before the close: closing on unread bytes sends a reset, which can destroy the answer."""
        if self.cycle is not None and isinstance(self.cycle.transport, _HeadWithBody):
            self.cycle.transport.seal()  # a write after the end of stream raises: the answer's cycle writes no more
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self.flow.resume_reading()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _head_refusal(self) -> ProxyError | None:
        """What the parser leaves to the server in a complete head: `Host`, and requests it would read as a
        protocol switch (whose body it skips)."""
        version = self.parser.get_http_version()
        if version not in ("1.0", "1.1"):
            # llhttp reads a request line without a version as HTTP/0.9 and still parses headers and a body.
            return MalformedHTTP(f"HTTP/{version} is not served: the request line must end in HTTP/1.1 or HTTP/1.0")
        if self._hosts > 1 or (version == "1.1" and self._hosts == 0):
            return MalformedHTTP("a request carries one Host header, and HTTP/1.1 requires it (RFC 9112, 3.2)")
        if not self.url.startswith(b"/") or b"#" in self.url:
            # Absolute or asterisk form: uvicorn would keep only the path of it, hiding the rest from the checks.
            return MalformedHTTP("the request target must be a path and a query (origin form, RFC 9112 3.2.1)")
        if self.parser.should_upgrade():
            if self.parser.get_method() == b"CONNECT":
                return MalformedHTTP("CONNECT is not served: the proxy is not a tunnel")
            if self._framing.get(b"content-length", b"0").strip() != b"0" or b"transfer-encoding" in self._framing:
                return MalformedHTTP("a request offering a protocol upgrade may not carry a body")
        return None

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

    def _stop_leftover_clock(self) -> None:
        if self._leftover_timer is not None:
            self._leftover_timer.cancel()
            self._leftover_timer = None

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
        if self._refused or self._ignoring or self._reading is _Reading.BODY:
            return
        if self._reading is _Reading.HEAD:
            timeout = self.limits.header_read_timeout
            self._refuse(RequestTimeout(f"the request head did not arrive within {timeout:g} s"))
        else:
            self.transport.close()

    def _head_refused(self, data: bytes) -> bool:
        """Refuses the head being read if `data` makes it too large or puts a bare CR in it (a CR not followed by
        LF, on which a parser would wait for a line end until the timeout)."""
        if not self._head_started:
            # Blank lines before a head, which the parser skips: they count toward its size, never as its end.
            head = data.lstrip(b"\r\n")
            self._head_bytes += len(data) - len(head)
            self._head_started = bool(head)
            data = head
        window = self._tail + data
        end = _HEAD_END.search(window)
        self._tail = window[-2:]
        head_part = len(data) if end is None else max(0, end.end() - (len(window) - len(data)))
        self._head_bytes += head_part
        if self._head_bytes > self.limits.max_header_bytes:
            self._refuse(HeadersTooLarge(f"the request head is larger than {self.limits.max_header_bytes} bytes"))
            return True
        if _BARE_CR.search(window, 0, len(window) if end is None else end.start()) is not None:
            self._refuse(MalformedHTTP("the request head has a bare CR; lines must end with CRLF"))
            return True
        return False

    def _refuse(self, error: ProxyError) -> None:
        """Answer `error` in the OpenAI envelope and close the connection, whatever state the parser is in."""
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        self._stop_head_clock()
        self._unset_keepalive_if_required()
        self.transport.write(_error_response(error, self.server_state.default_headers))
        self._linger_then_close()


class _HeadWithBody:
    """The connection's transport as a response's cycle writes to it: the head is held until the body's first
    bytes, or the end of the loop turn it was written in, whichever comes first, and goes out in one write with
    them. uvicorn writes the head and the body apart, two writes and two segments: the client woke for the head
    and read again for the body. An answer written whole in one turn (every non-streamed answer) now leaves in one
    write; a stream's head is held no longer than the turn."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._flush_at_turn_end: asyncio.Handle | None = None
        self._head_written = False
        self._sealed = False

    def write(self, data: bytes) -> None:
        if self._sealed:
            return
        if data.startswith(_INTERIM):
            self._transport.write(data)  # `100 Continue`: the client waits for it before sending the body
            return
        if not self._head_written:
            self._head_written = True
            self._held = data
            self._flush_at_turn_end = self._loop.call_soon(self.flush)
            return
        if self._held is not None:
            data = self._held + data
            self._held = None
            assert self._flush_at_turn_end is not None
            self._flush_at_turn_end.cancel()
        self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def seal(self) -> None:
        """What is held goes now, and nothing written after it does: the connection is ending."""
        self.flush()
        self._sealed = True

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        assert self._flush_at_turn_end is not None
        self._flush_at_turn_end.cancel()
        if not self._transport.is_closing():
            self._transport.write(held)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Reading(enum.Enum):
    """Where a connection is in reading its client's next request."""

    IDLE = "idle"  # between requests: no byte of the next head yet
    HEAD = "head"
    BODY = "body"  # the head is in; the body (if any) follows


def _framing_refusal(name: bytes, value: bytes, seen: dict[bytes, bytes]) -> ProxyError | None:
    """Why a body's framing header is refused, given the framing headers the head named before it: the checks
    the parser leaves to the server (a body framed two ways could hide a second request)."""
    if seen.keys() - {name}:
        return MalformedHTTP("a request may not carry both Content-Length and Transfer-Encoding (RFC 9112, 6.1)")
    if name in seen:
        return MalformedHTTP(f"a request may carry one {name.decode()} header")
    if name == b"transfer-encoding" and value.strip().lower() != b"chunked":
        return MalformedHTTP("the only transfer coding accepted is chunked")
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
