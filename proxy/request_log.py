"""The record of one request: filled in as the request is handled, turned into the `X-Context-*` response
headers when the response starts, and completed once when it ends: logged as one summary line and handed to
the callback the app was built with (its metrics)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import structlog
from litestar.types import HTTPResponseStartEvent, Message, Scope, Send

from contextlift.proxy.shadow.case import ShadowCase
from contextlift.proxy.upstream.ledger import CallLedger
from contextlift.strategies import AppliedStep, DocumentOrder, Pipeline, render_applied

CLIENT_CLOSED_REQUEST = 499
"""nginx's status for a request whose client went away before the response was complete."""
_RECORD_KEY = "contextlift_record"
_MAX_REQUEST_ID = 128
MAX_ORDER_NUMBERS = 64
"""Document numbers `X-Context-Order` and `X-Context-Dropped` list before `...+N`: a header stays a few hundred
bytes whatever the request carries (a proxy or a load balancer may refuse a response head past 8 KiB)."""

log = structlog.get_logger("contextlift.request")


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request."""

    request_id: str
    method: str
    route: str
    started: float = field(default_factory=time.perf_counter)
    model: str | None = None
    requested: Pipeline = field(default_factory=Pipeline)
    """The strategies the request selected (or its model's default), as resolved."""
    applied: tuple[AppliedStep, ...] | None = None
    """The steps that ran, once the pipeline has returned; until then the response reports `requested`."""
    documents: int = 0
    document_format: str = "none: not-requested"
    """What detection found (`X-Context-Format`): the shape, or `none: <reason>`."""
    ledger: CallLedger = field(default_factory=CallLedger)
    """The request's upstream calls: handed to its `RequestUpstream`, which counts into it."""
    planned_calls: int | None = None
    """Set when headers go out before the calls are made (streamed medoid): the number of calls launched."""
    status: int | None = None
    error: str | None = None
    first_event_seconds: float | None = None
    """For streams: time from the request to the first event relayed."""
    policy: str | None = None
    """For `auto`: the rule applied and its evidence (`X-Context-Policy`)."""
    order: DocumentOrder | None = None
    """Where the client's documents went upstream, once the transforms have run (`X-Context-Order`)."""
    scores: str | None = None
    """Each ranked step's ranking (`X-Context-Scores`), where the request asked with `X-Context-Debug: scores`."""
    shadow: ShadowCase | None = None
    """Set when the request was sampled for shadow evaluation: what was served, for the evaluation to compare."""
    on_complete: Callable[[RequestRecord, float], None] | None = None
    """Told the record and the request's duration in seconds when it completes (the app's metrics)."""
    _logged: bool = False

    def first_event(self) -> None:
        if self.first_event_seconds is None:
            self.first_event_seconds = time.perf_counter() - self.started

    def overhead_ms(self) -> float:
        """Time spent in the proxy itself so far: from the first byte of the request's head (when the server
        recorded it, else from the record's creation) until now, minus the time the upstream held its calls."""
        return max(0.0, (time.perf_counter() - self.started - self.ledger.waited_seconds()) * 1000)

    @property
    def strategy(self) -> str:
        """What `X-Context-Strategy` says: the steps that ran, or the selection while they have not returned."""
        return self.requested.label if self.applied is None else render_applied(self.applied)

    @property
    def strategy_names(self) -> tuple[str, ...]:
        """The names of those steps, parameters and notes left out (the metrics' bounded label)."""
        if self.applied is None:
            return tuple(step.strategy.name for step in self.requested.steps)
        return tuple(step.name for step in self.applied)

    def response_headers(self) -> dict[str, str]:
        return {
            "x-contextlift-request-id": self.request_id,
            "x-context-strategy": self.strategy,
            "x-context-documents": str(self.documents),
            "x-context-format": self.document_format,
            "x-context-upstream-calls": str(max(self.ledger.calls, self.planned_calls or 0)),
            "x-context-upstream-failures": self.ledger.failures_summary(),
            "x-context-overhead-ms": f"{self.overhead_ms():.1f}",
            **({"x-context-policy": self.policy} if self.policy is not None else {}),
            **self._order_headers(),
            **({"x-context-scores": self.scores} if self.scores is not None else {}),
        }

    def _order_headers(self) -> dict[str, str]:
        """`X-Context-Order: 6,1,2,...` (the client's document numbers in the order sent, `kept`, or `permuted`
        where each call sent them in an order of its own) and `X-Context-Dropped: 3,7` for the documents left out."""
        if self.order is None:
            return {}
        order = "permuted" if self.order.permuted else "kept" if self.order.kept else _numbers(self.order.sent)
        headers = {"x-context-order": order}
        if self.order.dropped:
            headers["x-context-dropped"] = _numbers(self.order.dropped)
        return headers

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
        if self.order is not None:
            order = self._order_headers()
            fields["document_order"] = order["x-context-order"]
            if "x-context-dropped" in order:
                fields["documents_dropped"] = order["x-context-dropped"]
        if self.ledger.usage:
            fields.update({f"usage_{k}": v for k, v in self.ledger.usage.items()})
        if self.error:
            fields["error"] = self.error
        log.info("request", **fields)
        if self.on_complete is not None:
            self.on_complete(self, time.perf_counter() - self.started)


RECEIVED_EXTENSION = "contextlift.received"
"""A scope extension the server sets: `{"at": time.perf_counter()}` of the first byte of the request's head."""
DELIVERED_EXTENSION = "contextlift.delivered"
"""A scope extension the server sets: `{"wait": async () -> bool}`, whether what the response wrote left for the
client (False: the connection was lost with it unread)."""


class RequestLog:
    """Creates each request's record, stamps its headers on the response, and completes it when the response
    has been sent, handing it to `on_complete`."""

    def __init__(self, on_complete: Callable[[RequestRecord, float], None] | None = None) -> None:
        self._on_complete = on_complete

    def record_of(self, scope: Scope) -> RequestRecord:
        """The record of the request in `scope`, created on first use."""
        state = scope.setdefault("state", {})
        record = state.get(_RECORD_KEY)
        if record is None:
            headers = dict(scope.get("headers", []))
            given = headers.get(b"x-request-id", b"").decode("latin-1").strip()
            valid = given and len(given) <= _MAX_REQUEST_ID and given.isprintable()
            request_id = given if valid else _new_request_id()
            method = str(scope.get("method", ""))
            record = RequestRecord(request_id, method, _route_template(scope), on_complete=self._on_complete)
            received = ((scope.get("extensions") or {}).get(RECEIVED_EXTENSION) or {}).get("at")
            if isinstance(received, float):
                record.started = received
            state[_RECORD_KEY] = record
        return record

    def stamped(self, scope: Scope, send: Send) -> Send:
        """`send` for the request in `scope`, adding the record's headers to the response as it starts, and
        completing the record once the response's last bytes have been handed to the server: the summary line and
        the metrics come after the client has its whole answer, not before its last bytes."""

        async def stamping_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._stamp(message, scope)
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                delivered = False
                try:
                    await send(message)
                    # The summary says what the client got: an answer it left unread in the buffers is a 499.
                    delivered = await _delivered(scope)
                finally:
                    self.record_of(scope).finish(None if delivered else CLIENT_CLOSED_REQUEST)
                return
            await send(message)

        return stamping_send

    def cut(self, scope: Scope) -> None:
        """At the request's end: a record whose answer never ended (the client left, the stream was cut) is
        logged as 499, once."""
        self.record_of(scope).finish(CLIENT_CLOSED_REQUEST)

    def _stamp(self, message: HTTPResponseStartEvent, scope: Scope) -> None:
        """The record's headers set on the response head (each one replacing a header of its name), in one pass
        over the head: setting them one by one (litestar's `MutableScopeHeaders`) rescanned it per header."""
        record = self.record_of(scope)
        record.status = message["status"]
        stamped: dict[bytes, bytes | None] = {
            name.encode("latin-1"): value.encode("latin-1") for name, value in record.response_headers().items()
        }
        headers: list[tuple[bytes, bytes]] = []
        for name, value in message.get("headers") or ():
            lowered = name.lower()
            if lowered not in stamped:
                headers.append((name, value))
            elif (ours := stamped[lowered]) is not None:  # its first occurrence takes the record's value
                headers.append((lowered, ours))
                stamped[lowered] = None
        headers.extend((name, value) for name, value in stamped.items() if value is not None)
        # The upstream's id is the one its support can look up, and the one the SDKs expose: it stays.
        if not any(name.lower() == b"x-request-id" for name, _ in headers):
            headers.append((b"x-request-id", record.request_id.encode("latin-1")))
        message["headers"] = headers


_REQUEST_IDS = random.Random()
"""Request ids' own generator, seeded from the OS (again in a forked child): a `random.seed` elsewhere in the
process (an eval's shuffle) cannot make two requests' ids repeat."""
os.register_at_fork(after_in_child=_REQUEST_IDS.seed)


async def _delivered(scope: Scope) -> bool:
    wait = ((scope.get("extensions") or {}).get(DELIVERED_EXTENSION) or {}).get("wait")
    return True if wait is None else await cast(Callable[[], Awaitable[bool]], wait)()


def _new_request_id() -> str:
    """32 hex digits, as a UUID4's `hex` wrote them, where `uuid.uuid4()` asked the OS for 16 bytes a request, a
    system call per request. An
    id names a request in the logs and headers; nothing relies on it being unguessable."""
    return f"{_REQUEST_IDS.getrandbits(128):032x}"


def _numbers(numbers: tuple[int, ...]) -> str:
    shown = ",".join(map(str, numbers[:MAX_ORDER_NUMBERS]))
    hidden = len(numbers) - MAX_ORDER_NUMBERS
    return f"{shown},...+{hidden}" if hidden > 0 else shown


def _route_template(scope: Scope) -> str:
    handler = scope.get("route_handler")
    paths = getattr(handler, "paths", None)
    return sorted(paths)[0] if paths else "unmatched"
