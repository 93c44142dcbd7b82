"""One client request as the routes serve it: the app's state, this request's record and the request itself,
looked up once when a route is entered and handed down to everything that serves it, the stream relays that run
after the handler has returned included. Nothing below a route looks the state or the record up again from the
ASGI scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request

from contextlift.proxy.edge.admission import LEASE_KEY
from contextlift.proxy.request_log import RequestRecord
from contextlift.proxy.state import ProxyState, proxy_state
from contextlift.proxy.upstream.request import RequestUpstream


@dataclass(frozen=True, slots=True)
class Exchange:
    request: Request[Any, Any, Any]
    state: ProxyState
    record: RequestRecord

    @classmethod
    def enter(cls, request: Request[Any, Any, Any]) -> Exchange:
        state = proxy_state(request)
        return cls(request, state, state.request_log.record_of(request.scope))

    def upstream(self, **options: Any) -> RequestUpstream:
        """The upstream as this request sees it: its headers, query and memory lease, calls entered in its
        record's ledger; `options` as `RequestUpstream` takes them (a call budget, retries, the client's bytes)."""
        return RequestUpstream(
            self.state.upstream,
            self.request.headers,
            lease=self.request.scope.get("state", {}).get(LEASE_KEY),
            # What `request.url.query` says, without building the whole URL for it.
            query=self.request.scope.get("query_string", b"").decode(),
            ledger=self.record.ledger,
            **options,
        )
