"""A call read whole from a plain `http://` upstream, made on the event loop's own transport and parsed by httptools
(llhttp, the parser the proxy's server reads requests with): the way `UpstreamClient.fetch` calls an `http`
upstream on the default (aiohttp) transport. Streams, relayed calls, `https` and a `HEAD` go through aiohttp.

Written here rather than taken from a library because none fits the proxy's hottest call: a small chat call cost
the proxy about 210 us of CPU through `fetch` on aiohttp's client, 145 us of it aiohttp's own (its session,
request and response objects, timers, and a task per request to write the body), where the same call on a bare
protocol and llhttp cost about 40 (the three in one process, taking turns, against one fake upstream on the other
core). httpcore parses in pure Python (h11), slower still. What llhttp leaves to its caller is what this module
holds, kept to what a call read whole needs:

- a pool of kept-alive connections per host and port, idle ones taken newest first; one that closed, outlived
  `IDLE_SECONDS` or received a byte while idle (a late or stray answer: never read as the next request's) is
  dropped, never used; nothing is sent twice (the proxy counts and retries its calls itself);
- the request written in one write, as `UpstreamClient` built it (its header names, values and framing as they
  are: the same bytes httpx's own pool sends);
- the answer's head bounded (`MAX_RESPONSE_HEADERS` headers, each within `MAX_HEAD_LINE_BYTES`), waited for at most
  the read timeout from when the request went out; interim answers (`100`, `103`) skipped as aiohttp skips them,
  a protocol switch refused (`MalformedAnswer`);
- the body buffered as it arrives, reading paused past `BUFFER_BYTES` until the caller takes it (its size, decoding,
  silence and deadline are the caller's bounds, `proxy.upstream.bodies`); a body without a length ends with the
  connection;
- every failure as httpx's own pool reports it (`ConnectError`, `ConnectTimeout`, `ReadTimeout`,
  `RemoteProtocolError`, `ReadError`), so the proxy maps it by the same rule (`transport_errors`); a call given
  up on (cancelled, failed, its body left unread) drops its connection at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from typing import Any, cast

import httptools
import httpx

from contextlift.proxy.upstream.answers import (
    MAX_HEAD_LINE_BYTES,
    MAX_RESPONSE_HEADERS,
    SENT_EXTENSION,
    WAIT_EXTENSION,
    MalformedAnswer,
    RawAnswer,
)

IDLE_SECONDS = 15.0
"""How long a kept-alive connection may wait in the pool (aiohttp's keep-alive default)."""
BUFFER_BYTES = 256 * 1024
"""Body bytes held for the caller before reading from the socket pauses."""
MAX_HEAD_BYTES = 4 * MAX_HEAD_LINE_BYTES
"""An answer's whole head at most (status line and headers; httpx's own pool took 100 KiB). llhttp hands a header
over only once its line is whole, so a line is bounded while it arrives by this, and by `MAX_HEAD_LINE_BYTES` once
whole."""
MAX_UNBODIED_BYTES = MAX_HEAD_LINE_BYTES
"""Bytes of the body phase that carry no body (chunk lines, trailers) allowed in a row."""
_NO_BODY = frozenset({204, 304})


class Http11Pool:
    """Kept-alive connections to plain-HTTP upstreams, at most `max_idle` waiting per host and port."""

    def __init__(self, max_idle: int) -> None:
        self._max_idle = max_idle
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    async def call(
        self,
        method: str,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        content: bytes | None,
        extensions: dict[str, Any],
    ) -> RawAnswer:
        """`method` to `url` with `headers` as they go (Host and framing included) and `content`, answered once
        its head is in; `extensions` as an `httpx.Request` carries them (its timeouts, `WAIT_EXTENSION`). The
        answer's `aclose` gives the connection back when its body was read whole, else drops it."""
        timeout = extensions.get("timeout", {})
        waited: Callable[[float, float], None] | None = extensions.get(WAIT_EXTENSION)
        request = _request_bytes(method, url, headers, content)
        key = (url.host, url.port or 80)
        start = time.perf_counter()
        connection = self._take(key)
        if connection is None:
            try:
                connection = await self._connect(key, timeout.get("connect"), timeout.get("pool"))
            except BaseException:
                if waited is not None:
                    waited(start, time.perf_counter())
                raise
        try:
            status, answer_headers = await connection.ask(request, timeout.get("read"))
        except BaseException:
            connection.drop()
            raise
        finally:
            sent = connection.sent_at
            if waited is not None:
                waited(sent or start, time.perf_counter())
        if sent is not None:
            extensions[SENT_EXTENSION] = sent
        headers_read = httpx.Headers(answer_headers)
        encoding = headers_read.get("content-encoding", "")
        return RawAnswer(
            status, headers_read, encoding, connection.body_piece(waited), self._finisher(key, connection),
            connection.body_whole,
        )  # fmt: skip

    def close(self) -> None:
        """Drop every idle connection (at shutdown)."""
        for connections in self._idle.values():
            for connection in connections:
                connection.drop()
        self._idle.clear()

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now):
                return connection
            connection.drop()
        return None

    async def _connect(self, key: tuple[str, int], connect: float | None, pool: float | None) -> _Connection:
        """A new connection, with aiohttp's bounds as `_acquire_bound` sets them: each TCP connect within
        `connect`, the whole set-up (resolving the name included) within the pool wait and `connect` together.
        Each address the name resolves to is tried in turn."""
        loop = asyncio.get_running_loop()
        whole = None if pool is None or connect is None else pool + connect
        try:
            async with asyncio.timeout(whole):
                infos = await loop.getaddrinfo(key[0], key[1], type=socket.SOCK_STREAM)
                failure: BaseException = OSError(f"{key[0]} resolved to no address")
                for family, _kind, proto, _, address in infos:
                    try:
                        async with asyncio.timeout(connect):
                            transport, connection = await loop.create_connection(
                                _Connection, str(address[0]), key[1], family=family, proto=proto
                            )
                        break
                    except (OSError, TimeoutError) as error:
                        failure = error
                else:
                    raise failure
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {key[0]}:{key[1]} in time") from None
        except OSError as error:
            raise httpx.ConnectError(str(error) or type(error).__name__) from error
        if connection.transport is None:  # uvloop calls `connection_made` a loop turn after the connection returns
            connection.connection_made(transport)
        return connection

    def _finisher(self, key: tuple[str, int], connection: _Connection) -> Callable[[], Any]:
        async def finish() -> None:
            if not connection.finished_cleanly():
                connection.drop()
                return
            idle = self._idle.setdefault(key, [])
            if len(idle) >= self._max_idle:
                idle.pop(0).drop()
            connection.idle_since = time.monotonic()
            idle.append(connection)

        return finish


def _request_bytes(method: str, url: httpx.URL, headers: list[tuple[bytes, bytes]], content: bytes | None) -> bytes:
    target = url.raw_path  # the path and query, as httpx encoded them
    lines = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value or b":" in name:
            raise httpx.LocalProtocolError("a request header name or value holds a line break or a colon")
        lines += [name, b": ", value, b"\r\n"]
    lines.append(b"\r\n")
    if content:
        lines.append(content)
    return b"".join(lines)


class _Connection(asyncio.Protocol):
    """One kept-alive connection and the answer it is reading (one at a time)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.sent_at: float | None = None
        self._parser = httptools.HttpResponseParser(self)
        # As aiohttp reads answers (its response parser is llhttp too): a quirky upstream's header value, bare LF line
        # ends and spaces after a chunk size are read, not refused.
        self._parser.set_dangerous_leniencies(
            lenient_headers=True, lenient_optional_cr_before_lf=True, lenient_spaces_after_chunk_size=True
        )
        self._loop = asyncio.get_running_loop()
        self._asking = False  # an answer is awaited or being read: bytes are its
        self._closed = False
        self._stray = False  # bytes came that no answer asked for: never reused
        self._head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._head_bytes = 0
        self._heard = 0.0  # the loop's time of the head's last bytes
        self._unbodied = 0
        self._head_in = False
        self._interim = False
        self._status = 0
        self._until_close = False  # a body without a length: it ends with the connection
        self._keep_alive = False
        self._buffer = bytearray()
        self._whole = False
        self._error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._timer: asyncio.TimerHandle | None = None

    # --- the caller's side --------------------------------------------------------------------------------------

    def reusable(self, now: float) -> bool:
        transport = self.transport
        return (
            transport is not None
            and not self._closed
            and not self._stray
            and not transport.is_closing()
            and now - self.idle_since < IDLE_SECONDS
        )

    async def ask(self, request: bytes, read_timeout: float | None) -> tuple[int, list[tuple[bytes, bytes]]]:
        """Write `request` and wait for its answer's head: its status and raw headers."""
        assert self.transport is not None
        assert not self._asking
        self._asking = True
        self._head = self._loop.create_future()
        if self._closed or self.transport.is_closing():
            raise httpx.RemoteProtocolError("Server disconnected")
        self.transport.write(request)
        self.sent_at = time.perf_counter()
        if read_timeout is not None:
            self._heard = self._loop.time()
            self._timer = self._loop.call_later(read_timeout, self._head_timed_out, read_timeout)
        try:
            return await self._head
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def body_piece(self, waited: Callable[[float, float], None] | None) -> Callable[[], Any]:
        async def next_piece() -> bytes:
            """What of the body has come (b"" at its end), waiting for more where nothing has."""
            while not self._buffer:
                if self._error is not None:
                    raise self._error
                if self._whole:
                    return b""
                self._waiter = self._loop.create_future()
                start = time.perf_counter()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
                    if waited is not None:
                        waited(start, time.perf_counter())
            piece = bytes(self._buffer)
            self._buffer.clear()
            if self._paused and self.transport is not None:
                self._paused = False
                self.transport.resume_reading()
            return piece

        return next_piece

    def body_whole(self) -> bool:
        """Whether the rest of the body is in: the next read cannot wait."""
        return self._whole or self._error is not None

    def finished_cleanly(self) -> bool:
        """The answer read whole, nothing after it, and the connection fit for the next request."""
        done = self._whole and not self._buffer and self._error is None and self._keep_alive and not self._stray
        transport = self.transport
        if not done or transport is None or transport.is_closing() or transport.get_write_buffer_size():
            return False
        self._asking = False
        self._head = None
        self._headers = []
        self._head_bytes = self._unbodied = 0
        self._head_in = self._whole = False
        self.sent_at = None
        return True

    def drop(self) -> None:
        self._closed = True
        if self.transport is not None:
            self.transport.abort()
        self._fail(httpx.RemoteProtocolError("the connection was dropped"))

    # --- the protocol's side ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.transport is not None:
            return  # made already (see `Http11Pool._connect`)
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if not self._asking or self._whole:
            # A late or stray answer on an idle connection, or bytes after a whole answer: never the next request's.
            self._stray = True
            self._closed = True
            if self.transport is not None:
                self.transport.abort()
            return
        if not self._head_in:
            self._head_bytes += len(data)
            self._heard = self._loop.time()
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(MalformedAnswer(f"the answer's head is larger than {MAX_HEAD_BYTES} bytes"))
                return
        else:
            self._unbodied += len(data)  # back to 0 with each piece of body (`on_body`)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(MalformedAnswer(f"upstream answered {self._status} to a request that asked for none"))
        except httptools.HttpParserError as error:
            if self._stray:  # a second answer began after the one asked for: not read, the connection ends
                self._closed = True
                if self.transport is not None:
                    self.transport.abort()
            elif isinstance(error.__context__, _Refused):  # raised by a callback below, wrapped by the parser
                self._fail(error.__context__.error)
            else:
                kind = httpx.RemoteProtocolError if self._head_in else MalformedAnswer
                self._fail(kind(f"the answer is not valid HTTP/1.1: {str(error)[:200]}"))
        if self._unbodied > MAX_UNBODIED_BYTES and not self._whole:
            # A trailer or chunk line growing without a byte of body (llhttp would hold it all).
            self._fail(httpx.RemoteProtocolError(f"more than {MAX_UNBODIED_BYTES} bytes of chunk lines and trailers"))
        if len(self._buffer) > BUFFER_BYTES and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._ended()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._ended(exc)

    def on_message_begin(self) -> None:
        if self._whole:
            self._stray = True  # a second answer after the one asked for: never read (the parse stops here)
            raise _Refused(httpx.RemoteProtocolError("an answer no request asked for"))
        self._headers = []
        self._interim = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_in:
            return  # a trailer: never part of the head
        if len(self._headers) >= MAX_RESPONSE_HEADERS:
            raise _Refused(MalformedAnswer(f"the answer has more than {MAX_RESPONSE_HEADERS} headers"))
        if len(name) + len(value) + 2 > MAX_HEAD_LINE_BYTES:
            raise _Refused(MalformedAnswer(f"an answer header is longer than {MAX_HEAD_LINE_BYTES} bytes"))
        self._headers.append((name, value.rstrip(b" \t")))  # a value's trailing whitespace is not part of it

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        self._status = status
        if status == 101 or status < 100:
            raise _Refused(MalformedAnswer(f"upstream answered {status} to a request that asked for none"))
        if status < 200:  # an interim answer (100, 103): the real one follows, as aiohttp reads it
            self._interim = True
            return
        self._head_in = True
        self._keep_alive = self._parser.should_keep_alive()
        names = {name.lower() for name, _ in self._headers}
        codings = b",".join(v for n, v in self._headers if n.lower() == b"transfer-encoding").split(b",")
        chunked = b"transfer-encoding" in names and codings[-1].strip().lower() == b"chunked"
        # RFC 9112, 6.3: no length and not chunked last (any other coding included): the body ends with the connection.
        self._until_close = status not in _NO_BODY and b"content-length" not in names and not chunked
        if self._head is not None and not self._head.done():
            self._head.set_result((status, self._headers))

    def on_body(self, body: bytes) -> None:
        self._unbodied = 0
        self._buffer += body
        self._wake()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            self._head_bytes = 0
            return
        self._whole = True
        self._wake()

    # --- inside ---------------------------------------------------------------------------------------------------

    def _ended(self, exc: Exception | None = None) -> None:
        """The upstream closed its side (EOF) or the connection is lost."""
        self._keep_alive = False
        if not self._asking or self._whole:
            return
        if self._head_in and self._until_close and exc is None:
            self._whole = True  # a body without a length ends here
            self._wake()
            return
        if isinstance(exc, ConnectionResetError | BrokenPipeError):
            self._fail(httpx.ReadError(str(exc) or type(exc).__name__))
        elif self._head_in:
            self._fail(httpx.RemoteProtocolError("Response payload is not completed: the connection closed"))
        else:
            self._fail(httpx.RemoteProtocolError("Server disconnected"))

    def _head_timed_out(self, seconds: float) -> None:
        """The read timeout as aiohttp's and httpx's run it, as silence: each of the head's reads (an interim answer's
        too) starts it again. One timer a call, set again only where bytes came meanwhile."""
        self._timer = None
        if self._head is None or self._head.done():
            return
        left = self._heard + seconds - self._loop.time()
        if left > 0:
            self._timer = self._loop.call_later(left, self._head_timed_out, seconds)
            return
        self._fail(httpx.ReadTimeout(f"nothing from the upstream for {seconds:g} s"))

    def _fail(self, error: Exception) -> None:
        if self._error is None and self._asking and not self._whole:
            self._error = error
        self._keep_alive = False
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved here: the caller that awaits it raises it; one gone must not log it
        self._wake()
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.abort()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _Refused(Exception):
    """Raised in a parser callback to stop the parse; `error` is what the call fails with."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
