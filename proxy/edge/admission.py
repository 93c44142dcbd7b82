"""Admission control for the `/v1` routes: the body is read whole under a deadline and a size limit (408, 413)
and charged to the memory budget (503), and only then does the request count against the in-flight limit (503
with `Retry-After`, never an unbounded queue). A client that dribbles its body therefore holds a connection,
which the server bounds, but never an in-flight slot."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send
from litestar.utils.scope.state import ScopeState
from prometheus_client import Gauge

from contextlift.proxy.budget import Lease, MemoryBudget
from contextlift.proxy.errors import Overloaded, PayloadTooLarge, ProxyError, RequestTimeout

LEASE_KEY = "contextlift_lease"
"""Where the request's memory lease lives in `scope["state"]`, for the routes to charge what they buffer."""
_AT_END_KEY = "contextlift_at_end"


def at_request_end(scope: Scope, release: Callable[[], None]) -> Callable[[], None]:
    """`release`, made safe to call more than once, and called when the request ends if nobody did before:
    a response body that never started to stream must not keep what it held."""
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            release()

    scope.setdefault("state", {}).setdefault(_AT_END_KEY, []).append(once)
    return once


@dataclass(slots=True)
class Admission:
    """Limits and the live count of admitted requests (one per process: the event loop is single-threaded)."""

    max_in_flight: int
    budget: MemoryBudget
    max_body_bytes: int = 16 * 1024 * 1024
    body_read_timeout: float = 60.0
    in_flight: int = 0
    gauge: Gauge | None = None

    def overloaded(self) -> ProxyError | None:
        if self.in_flight >= self.max_in_flight:
            return Overloaded(
                f"the proxy is at its limit of {self.max_in_flight} requests in flight; retry shortly",
                headers={"retry-after": "1"},
            )
        return None

    async def read_body(self, scope: Scope, receive: Receive, lease: Lease) -> bytes | None:
        """The whole request body, charged to `lease`; None if the client went away meanwhile.

        Raises:
            RequestTimeout: the body did not arrive within `body_read_timeout`.
            PayloadTooLarge: the declared or actual length is over `max_body_bytes`.
            MemoryBudgetExhausted: holding it would put the process over its budget.
        """
        too_large = PayloadTooLarge(f"request body larger than the limit of {self.max_body_bytes} bytes")
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise too_large
        try:
            async with asyncio.timeout(self.body_read_timeout):
                return await self._read(receive, lease, too_large)
        except TimeoutError:
            raise RequestTimeout(
                f"the request body did not arrive within {self.body_read_timeout:g} s", headers={"connection": "close"}
            ) from None

    async def _read(self, receive: Receive, lease: Lease, too_large: PayloadTooLarge) -> bytes | None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk: bytes = message.get("body", b"")  # type: ignore[assignment]
            if len(body) + len(chunk) > self.max_body_bytes:
                raise too_large
            lease.take(len(chunk))
            body += chunk
            if not message.get("more_body", False):
                return bytes(body)


ADMITTED_PREFIXES = ("/v1/", "/contextlift/")
"""Routes that read a client's body: the OpenAI ones and the proxy's own (`/contextlift/detect`)."""


class AdmissionMiddleware:
    """Applies `Admission` to the routes it wraps (those under `ADMITTED_PREFIXES`); probes pass untouched,
    so they answer under any load."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or not scope["path"].startswith(ADMITTED_PREFIXES):
            await self.app(scope, receive, send)
            return
        admission = self.admission
        lease = admission.budget.lease()
        try:
            try:
                body = await admission.read_body(scope, receive, lease)
            except ProxyError as error:
                await send_error(send, error)
                return
            if body is None:
                return
            refusal = admission.overloaded()
            if refusal is not None:
                await send_error(send, refusal)
                return
            scope.setdefault("state", {})[LEASE_KEY] = lease
            # litestar's `Request.body()` takes it from here, rather than reading it again through `receive`.
            ScopeState.from_scope(scope).body = body
            admission.in_flight += 1
            if admission.gauge is not None:
                admission.gauge.inc()
            try:
                await self.app(scope, _replaying(body, receive), send)
            finally:
                for release in scope["state"].get(_AT_END_KEY, ()):
                    release()
                admission.in_flight -= 1
                if admission.gauge is not None:
                    admission.gauge.dec()
        finally:
            lease.release()


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands over the body already read, then the client's own messages (disconnect)."""
    pending = True

    async def replay() -> ReceiveMessage:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def send_error(send: Send, error: ProxyError) -> None:
    """The error's envelope as a whole response, for layers that answer before a route does."""
    body = json.dumps(error.envelope()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
