"""The record of one request: filled in as the request is handled, turned into the `X-Context-*` response
headers when the response starts, and logged as one summary line when it ends."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import structlog
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.types import Message, Scope

from proxy.call_ledger import CallLedger
from proxy.metrics import ProxyMetrics

CLIENT_CLOSED_REQUEST = 499
"""nginx's status for a request whose client went away before the response was complete."""
_RECORD_KEY = "contextlift_record"
_MAX_REQUEST_ID = 128

log = structlog.get_logger("contextlift.request")


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request."""

    request_id: str
    method: str
    route: str
    started: float = field(default_factory=time.perf_counter)
    model: str | None = None
    strategy: str = "none"
    documents: int = 0
    document_format: str = "none: not-requested"
    """What detection found (`X-Context-Format`): the shape, or `none: <reason>`."""
    ledger: CallLedger = field(default_factory=CallLedger)
    planned_calls: int | None = None
    """Set when headers go out before the calls are made (streamed medoid): the number of calls launched."""
    status: int | None = None
    error: str | None = None
    first_event_seconds: float | None = None
    """For streams: time from the request to the first event relayed."""
    metrics: ProxyMetrics | None = None
    _logged: bool = False

    def first_event(self) -> None:
        if self.first_event_seconds is None:
            self.first_event_seconds = time.perf_counter() - self.started

    def overhead_ms(self) -> float:
        """Time spent in the proxy itself so far: elapsed time minus time waiting on the upstream."""
        return max(0.0, (time.perf_counter() - self.started - self.ledger.busy_seconds) * 1000)

    def response_headers(self) -> dict[str, str]:
        return {
            "x-contextlift-request-id": self.request_id,
            "x-context-strategy": self.strategy,
            "x-context-documents": str(self.documents),
            "x-context-format": self.document_format,
            "x-context-upstream-calls": str(max(self.ledger.calls, self.planned_calls or 0)),
            "x-context-upstream-failures": self.ledger.failures_summary(),
            "x-context-overhead-ms": f"{self.overhead_ms():.1f}",
        }

    def finish(self, status: int | None = None) -> None:
        """Log the summary line, once."""
        if self._logged:
            return
        self._logged = True
        if status is not None:
            self.status = status
        fields: dict[str, Any] = {
            "request_id": self.request_id,
            "method": self.method,
            "route": self.route,
            "status": self.status,
            "model": self.model,
            "strategy": self.strategy,
            "documents": self.documents,
            "document_format": self.document_format,
            "upstream_calls": self.ledger.calls,
            "upstream_failures": self.ledger.failures_summary(),
            "upstream_retries": self.ledger.retries,
            "latency_ms": round((time.perf_counter() - self.started) * 1000, 1),
            "overhead_ms": round(self.overhead_ms(), 1),
        }
        if self.ledger.usage:
            fields.update({f"usage_{k}": v for k, v in self.ledger.usage.items()})
        if self.error:
            fields["error"] = self.error
        log.info("request", **fields)
        if self.metrics is not None:
            self.metrics.observe_request(self, time.perf_counter() - self.started)


def record_of(scope: Scope) -> RequestRecord:
    """The record of the request in `scope`, created on first use."""
    state = scope.setdefault("state", {})
    record = state.get(_RECORD_KEY)
    if record is None:
        headers = dict(scope.get("headers", []))
        given = headers.get(b"x-request-id", b"").decode("latin-1").strip()
        request_id = given if given and len(given) <= _MAX_REQUEST_ID and given.isprintable() else uuid.uuid4().hex
        record = RequestRecord(request_id, str(scope.get("method", "")), _route_template(scope))
        app = scope.get("app")
        proxy = app.state.get("proxy") if app is not None else None
        record.metrics = proxy.metrics if proxy is not None else None
        state[_RECORD_KEY] = record
    return record


def _route_template(scope: Scope) -> str:
    handler = scope.get("route_handler")
    paths = getattr(handler, "paths", None)
    return sorted(paths)[0] if paths else "unmatched"


async def stamp_and_log(message: Message, scope: Scope) -> None:
    """`before_send` hook: add the record's headers to every response; log when the response is complete."""
    if scope["type"] != ScopeType.HTTP:
        return
    record = record_of(scope)
    if message["type"] == "http.response.start":
        record.status = message["status"]
        headers = MutableScopeHeaders.from_message(message)
        for name, value in record.response_headers().items():
            headers[name] = value
        # The upstream's id is the one its support can look up, and the one the SDKs expose: it stays.
        if "x-request-id" not in headers:
            headers["x-request-id"] = record.request_id
    elif message["type"] == "http.response.body" and not message.get("more_body", False):
        record.finish()
