"""Admission control before any body is read: too many requests in flight get a fast 503 with `Retry-After`
(never an unbounded queue), too many or too large headers a 431."""

from __future__ import annotations

import json
from dataclasses import dataclass

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send
from prometheus_client import Gauge

from proxy.errors import HeadersTooLarge, Overloaded, ProxyError


@dataclass(slots=True)
class Admission:
    """Limits and the live count of admitted requests (one per process: the event loop is single-threaded)."""

    max_in_flight: int
    max_header_count: int = 100
    max_header_bytes: int = 32 * 1024
    in_flight: int = 0
    gauge: Gauge | None = None

    def refusal(self, scope: Scope) -> ProxyError | None:
        headers = list(scope.get("headers", []))
        if len(headers) > self.max_header_count:
            return HeadersTooLarge(f"more than {self.max_header_count} request headers")
        if sum(len(name) + len(value) for name, value in headers) > self.max_header_bytes:
            return HeadersTooLarge(f"request headers larger than {self.max_header_bytes} bytes")
        if self.in_flight >= self.max_in_flight:
            return Overloaded(
                f"the proxy is at its limit of {self.max_in_flight} requests in flight; retry shortly",
                headers={"retry-after": "1"},
            )
        return None


class AdmissionMiddleware:
    """Counts requests in flight for the routes it wraps (the `/v1` ones), refusing those over the limits."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Probes must answer under load; only the /v1 routes are admitted and counted.
        if scope["type"] != ScopeType.HTTP or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        refusal = self.admission.refusal(scope)
        if refusal is not None:
            await _send_error(send, refusal)
            return
        self.admission.in_flight += 1
        if self.admission.gauge is not None:
            self.admission.gauge.inc()
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.in_flight -= 1
            if self.admission.gauge is not None:
                self.admission.gauge.dec()


async def _send_error(send: Send, error: ProxyError) -> None:
    body = json.dumps(error.envelope()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
