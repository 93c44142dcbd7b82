"""The HTTP server: uvicorn as released (h11), each connection held in `GuardedConnection` for the bounds uvicorn
lacks (see `proxy.edge.connection`), with a shutdown that ends within the grace period."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from collections.abc import Callable, Iterator
from types import FrameType

import structlog
import uvicorn
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from contextlift.proxy.edge.admission import send_error
from contextlift.proxy.edge.connection import ConnectionLink, GuardedConfig, HttpLimits, ThrottledWarnings
from contextlift.proxy.errors import ShuttingDown
from contextlift.proxy.settings import Settings

__all__ = ["HttpLimits", "PortUnavailable", "ProxyServer", "bind_sockets", "build_server", "listen"]

log = structlog.get_logger("contextlift")

CUT_SECONDS = 0.3
"""After the grace, how long cancelled requests get to write their 503 before every connection is dropped."""

LIFESPAN_SHUTDOWN_SECONDS = 0.3
"""The most the app's own shutdown (closing the upstream pool) may add after the grace."""


def build_server(app: ASGIApp, settings: Settings, *, on_drain: Callable[[float], None] | None = None) -> ProxyServer:
    """The server for `app` on `settings.host`/`settings.port` (or the sockets given to `run`).

    Args:
        app: the proxy app (`create_app`).
        settings: limits, timeouts and `shutdown_grace`.
        on_drain: called once with the grace in seconds when shutdown begins (a signal, or `should_exit`), so the
            app can refuse new work and end its streams before the server cuts them off.
    """
    cutoff = _Cutoff(app)
    limits = HttpLimits.from_settings(settings)
    config = GuardedConfig(
        ConnectionLink(cutoff, limits),
        limits,
        host=settings.host,
        port=settings.port,
        loop=settings.event_loop,
        ws="none",  # no websocket routes: an upgrade request is served as plain HTTP
        log_config=None,  # contextlift.proxy.observability.logs routes uvicorn's loggers through structlog
        log_level=settings.log_level,
        access_log=False,  # the proxy logs one line per request itself
        # uvicorn's X-Forwarded-For/-Proto rewrite of the client address and scheme: the proxy reads neither, and
        # the middleware scanned every request's headers (a trusted peer is loopback by default).
        proxy_headers=False,
    )
    _throttle_connection_warnings()
    return ProxyServer(config, cutoff, grace=settings.shutdown_grace, on_drain=on_drain)


class PortUnavailable(Exception):
    """The proxy's address cannot be had: the port is taken, or the host is none of this machine's."""


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to `port` on every address `host` names, as uvicorn's own start binds them, but not listening
    yet: `serve` holds its port from its first second, before the embedded model starts (which takes minutes), and
    connections are refused, not queued, until `listen`.

    Raises:
        PortUnavailable: an address is taken (another process listens there) or not this machine's.
    """
    try:
        # As asyncio's `create_server` reads a host: "" is every interface, a name every address it resolves to.
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as error:
        raise PortUnavailable(f"cannot listen on {_address(host, port)}: {error.strerror or error}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            # A restart binds while the last run's connections linger in TIME_WAIT; a listening socket still holds
            # the port against this one.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as error:
                raise PortUnavailable(_unavailable(host, port, error)) from None
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def listen(sockets: list[socket.socket], backlog: int) -> None:
    """Start listening on sockets from `bind_sockets` (the server would, at its start): where another process began
    listening on the port since it was bound (two starts at once), this says so rather than uvicorn's traceback.

    Raises:
        PortUnavailable: the port was taken meanwhile.
    """
    for sock in sockets:
        try:
            sock.listen(backlog)
        except OSError as error:
            host, port = sock.getsockname()[:2]
            raise PortUnavailable(_unavailable(host, port, error)) from None


def _unavailable(host: str, port: int, error: OSError) -> str:
    why = f"cannot listen on {_address(host, port)}: {error.strerror or error}"
    if error.errno == errno.EADDRINUSE:
        why += " (another process listens there: stop it, or serve on another port with --port)"
    return why


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _throttle_connection_warnings() -> None:
    """One `ThrottledWarnings` on uvicorn's connection logger per process, however many servers it builds."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(existing, ThrottledWarnings) for existing in logger.filters):
        logger.addFilter(ThrottledWarnings())


class _Cutoff:
    """The app as the server runs it. When the server cancels a request at the end of the grace, one whose
    response has not started gets the 503 envelope; one whose response has started has lost its connection
    already. Either way the cancellation ends the request quietly: it is the expected end, not an error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.active = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started = False

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except asyncio.CancelledError:
            if not self.active:
                raise
            if not started:
                message = "the proxy is shutting down; retry on another instance"
                await send_error(send, ShuttingDown(message, headers={"retry-after": "1", "connection": "close"}))


class ProxyServer(uvicorn.Server):
    """uvicorn, draining within the grace period. At SIGTERM/SIGINT (or `should_exit`) it stops accepting,
    closes idle connections, tells the app (`on_drain`) and waits for requests in flight until `grace` seconds
    after the signal; then what is left is cut off (503 envelope where no response has started, the connection
    dropped where one has) and the app's own shutdown gets LIFESPAN_SHUTDOWN_SECONDS."""

    def __init__(
        self, config: uvicorn.Config, cutoff: _Cutoff, *, grace: float, on_drain: Callable[[float], None] | None
    ) -> None:
        super().__init__(config)
        self.grace = grace
        self._cutoff = cutoff
        self._on_drain = on_drain
        self._deadline: float | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn re-raises the signal once it has shut down, killing the process before `serve` can stop the
        # embedded model; the drain is complete by then, so exit normally instead.
        with super().capture_signals():
            yield
            self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # said once clients can connect: the app has started and the sockets listen
            for server in self.servers:
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    log.info("listening", url=f"http://{_address(host, port)}/v1")

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._begin_drain()
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        deadline = self._begin_drain()
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        state = self.server_state
        # uvicorn's sets of connections and tasks offer nothing to wait on; poll them, as uvicorn does.
        while (state.connections or state.tasks) and not self.force_exit and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await self._cut()
        if self.force_exit:
            return
        try:
            await asyncio.wait_for(self.lifespan.shutdown(), LIFESPAN_SHUTDOWN_SECONDS)
        except TimeoutError:
            log.warning("the app's shutdown did not finish in time", seconds=LIFESPAN_SHUTDOWN_SECONDS)

    def _begin_drain(self) -> float:
        if self._deadline is None:
            self._deadline = time.monotonic() + self.grace
            log.info("shutting down", grace_seconds=self.grace)
            if self._on_drain is not None:
                self._on_drain(self.grace)
        return self._deadline

    async def _cut(self) -> None:
        """End the requests and connections that outlived the grace."""
        assert isinstance(self.config, GuardedConfig)
        tasks = set(self.server_state.tasks)
        connections = list(self.config.open_connections)
        if not tasks and not connections:
            return
        log.warning("grace period over; cutting off what is left", requests=len(tasks), connections=len(connections))
        self._cutoff.active = True
        # Dropped first, so that uvicorn sees these clients as gone and logs nothing when their requests end.
        for connection in connections:
            if connection.responding:
                connection.abort()
        await asyncio.sleep(0)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CUT_SECONDS)
        for leftover in list(self.config.open_connections):
            leftover.abort()
