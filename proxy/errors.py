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

from contextlift.strategies import UpstreamFailure


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
    """The request is not one the proxy can act on, where no subclass below says why: a field of the wrong type
    (`stream`, `stream_options`), `n` above 1 with a strategy that makes one answer, a malformed
    `X-Context-Retries`, or a header or body field naming an upstream URL or key (the upstream is configured)."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class MalformedJSON(InvalidRequest):
    """The body is not valid JSON, or not a JSON object."""

    code = "invalid_json"


class InvalidMessages(InvalidRequest):
    """`messages` is missing or empty, or a message is not an object with a non-empty `role` and a `content` the chat
    API allows (a string or an array of typed parts)."""

    code = "invalid_messages"


class InvalidStrategy(InvalidRequest):
    """The strategy selection (`X-Context-Strategy`, the body field `context_strategy`, or the model's default) names
    an unknown strategy, parameter, ranker or format, a value out of range or above its cap, steps in an order not
    allowed, or a pipeline whose calls with retries could pass `max_upstream_calls`; refused before any upstream
    call."""

    code = "invalid_strategy"


class InvalidPath(InvalidRequest):
    """The request path is not absolute, holds a control character, a space, a backslash or `;`, a malformed percent
    escape, or encodes a character that is refused."""

    code = "invalid_path"


class MalformedHTTP(InvalidRequest):
    """The bytes on the connection are not a valid HTTP/1.1 request; the connection is closed after this."""

    code = "malformed_http"


class NotFound(ProxyError):
    """No route serves the path."""

    status = 404
    type = "invalid_request_error"
    code = "not_found"


class MethodNotAllowed(ProxyError):
    """The path is served, but not for this method."""

    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class RequestTimeout(ProxyError):
    """The client did not send its request head or body within the read timeouts."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class PayloadTooLarge(ProxyError):
    """The body is over `max_body_bytes` (refused before it is read where Content-Length says so), or its documents
    are over `max_documents` or `max_document_bytes`."""

    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class UnsupportedMediaType(ProxyError):
    """The body's Content-Type is not `application/json`."""

    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class HeadersTooLarge(ProxyError):
    """The request head is over `max_header_bytes`, or has more than `max_header_count` headers."""

    status = 431
    type = "invalid_request_error"
    code = "headers_too_large"


class Overloaded(ProxyError):
    """The process is at `max_in_flight` requests or `max_connections` open connections; answered at once, with
    Retry-After: 1."""

    status = 503
    type = "server_error"
    code = "overloaded"


class MemoryBudgetExhausted(Overloaded):
    """Taking this body would put the bytes the process holds over max_buffered_bytes."""

    code = "memory_budget_exhausted"


class NotReady(ProxyError):
    """The proxy cannot answer this request yet, or any more: the embedder is still loading, a start-up step failed,
    or the proxy is shutting down."""

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
    """No connection to the upstream could be opened (refused, not resolved, or past `upstream_connect_timeout`)."""

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
    """An upstream attempt ran past `upstream_timeout` waiting for an answer or the stream's next event, or past
    `upstream_deadline` in all."""

    status = 504
    code = "upstream_timeout"


class CallBudgetExhausted(UpstreamError):
    """The request reached the most upstream calls one request may make."""

    code = "call_budget_exhausted"


class UpstreamStatusError(UpstreamError):
    """The upstream answered with an error status; the client gets that response as it came."""

    def __init__(
        self, status: int, content: bytes, headers: Mapping[str, str], *, refused: frozenset[str] = frozenset()
    ) -> None:
        """`refused`: the request fields the answer refuses by name (`contextlift.proxy.upstream.refusals`)."""
        super().__init__(f"upstream answered {status}", headers=headers)
        self.upstream_status = status
        self.content = content
        self._refused = refused

    @property
    def refused_fields(self) -> frozenset[str]:
        return self._refused
