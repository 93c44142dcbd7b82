"""Every error the proxy itself reports, drawn once. Each class carries its HTTP status and OpenAI `type`
and `code`; `error_response` turns any of them into the OpenAI envelope
`{"error": {"message", "type", "param", "code"}}`.

    ProxyError                       500 server_error / internal_error
    ├── InvalidRequest               400 invalid_request_error / invalid_request
    │   ├── MalformedJSON            400 ... / invalid_json
    │   ├── InvalidMessages          400 ... / invalid_messages
    │   ├── InvalidStrategy          400 ... / invalid_strategy
    │   ├── InvalidPath              400 ... / invalid_path
    │   └── MalformedHTTP            400 ... / malformed_http (a protocol error; the connection is closed)
    ├── NotFound                     404 invalid_request_error / not_found
    ├── MethodNotAllowed             405 invalid_request_error / method_not_allowed
    ├── RequestTimeout               408 invalid_request_error / request_timeout
    ├── PayloadTooLarge              413 invalid_request_error / payload_too_large
    ├── UnsupportedMediaType         415 invalid_request_error / unsupported_media_type
    ├── HeadersTooLarge              431 invalid_request_error / headers_too_large
    ├── NotReady                     503 server_error / not_ready
    │   └── ShuttingDown             503 server_error / shutting_down
    ├── Overloaded                   503 server_error / overloaded (in-flight or connection limit)
    │   └── MemoryBudgetExhausted    503 ... / memory_budget_exhausted
    └── UpstreamError (also strategies.UpstreamFailure)
        ├── UpstreamUnreachable      502 upstream_error / upstream_unreachable
        ├── UpstreamProtocolError    502 upstream_error / upstream_protocol_error
        │   ├── UpstreamConnectionLost  502 ... / upstream_connection_lost
        │   │   └── UpstreamAnswerCutOff   502 ... / upstream_connection_lost (mid-answer: never retried)
        │   ├── UpstreamBodyTooLarge    502 ... / upstream_body_too_large (decoded bytes)
        │   └── UpstreamRedirected      502 ... / upstream_redirect (never followed nor relayed)
        ├── UpstreamPoolExhausted    503 server_error / upstream_pool_exhausted (a wait inside the proxy)
        ├── UpstreamTimeout          504 upstream_error / upstream_timeout
        ├── CallBudgetExhausted      502 upstream_error / call_budget_exhausted
        └── UpstreamStatusError      the upstream's own status and body, relayed as they came

Never classify an error by its message: the class says it all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from strategies import UpstreamFailure


class ProxyError(Exception):
    """An error the proxy reports to the client; never shows internals."""

    status: ClassVar[int] = 500
    type: ClassVar[str] = "server_error"
    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = dict(headers or {})

    def envelope(self) -> dict[str, Any]:
        """The OpenAI error body."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequest(ProxyError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class MalformedJSON(InvalidRequest):
    code = "invalid_json"


class InvalidMessages(InvalidRequest):
    code = "invalid_messages"


class InvalidStrategy(InvalidRequest):
    code = "invalid_strategy"


class InvalidPath(InvalidRequest):
    code = "invalid_path"


class MalformedHTTP(InvalidRequest):
    """The bytes on the connection are not a valid HTTP/1.1 request; the connection is closed after this."""

    code = "malformed_http"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class MethodNotAllowed(ProxyError):
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class RequestTimeout(ProxyError):
    """The client did not send its request head or body within the read timeouts."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class PayloadTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class UnsupportedMediaType(ProxyError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class HeadersTooLarge(ProxyError):
    status = 431
    type = "invalid_request_error"
    code = "headers_too_large"


class Overloaded(ProxyError):
    status = 503
    type = "server_error"
    code = "overloaded"


class MemoryBudgetExhausted(Overloaded):
    """Taking this body would put the bytes the process holds over max_buffered_bytes."""

    code = "memory_budget_exhausted"


class NotReady(ProxyError):
    status = 503
    type = "server_error"
    code = "not_ready"


class ShuttingDown(NotReady):
    """The proxy is stopping; its grace period ran out before this response was complete."""

    code = "shutting_down"


class UpstreamError(UpstreamFailure, ProxyError):
    """An upstream call failed."""

    type = "upstream_error"
    code = "upstream_error"
    status = 502


class UpstreamUnreachable(UpstreamError):
    code = "upstream_unreachable"


class UpstreamProtocolError(UpstreamError):
    """The upstream answered something that is not a valid response."""

    code = "upstream_protocol_error"


class UpstreamConnectionLost(UpstreamProtocolError):
    """The connection broke (reset, closed early) before or while the upstream answered."""

    code = "upstream_connection_lost"


class UpstreamAnswerCutOff(UpstreamConnectionLost):
    """The connection broke after the upstream had begun its answer: the call was made, and billed, and what
    broke it (the prompt, the answer) would most likely break the next attempt at the same point."""


class UpstreamRedirected(UpstreamProtocolError):
    """The upstream answered a 3xx redirect. Following it would send the operator's key to another host, and
    relaying it would let the client's SDK send the prompt there, around the proxy."""

    code = "upstream_redirect"


class UpstreamBodyTooLarge(UpstreamProtocolError):
    """The upstream's answer, decompressed, is larger than the proxy reads."""

    code = "upstream_body_too_large"


class UpstreamPoolExhausted(UpstreamError):
    """No upstream connection came free in time: a wait inside the proxy, never blamed on the upstream.
    An UpstreamError all the same, so a strategy's fan-out treats it like any failed call."""

    status = 503
    type = "server_error"
    code = "upstream_pool_exhausted"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class CallBudgetExhausted(UpstreamError):
    """The request reached the most upstream calls one request may make."""

    code = "call_budget_exhausted"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; the client gets that response as it came."""

    def __init__(self, status: int, content: bytes, headers: Mapping[str, str]) -> None:
        super().__init__(f"upstream answered {status}", headers=headers)
        self.upstream_status = status
        self.content = content
