"""OpenTelemetry: a server span per request (the strategy and upstream spans nest beneath it), trace ids in
log lines, and an OTLP exporter when the standard `OTEL_EXPORTER_OTLP_*ENDPOINT` variables name one."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

_tracer = trace.get_tracer("contextlift.proxy")


def configure_tracing(endpoint: str | None, service_name: str) -> bool:
    """Install a tracer provider exporting over OTLP/HTTP when `endpoint` is set; returns whether it did.

    The exporter reads the rest of its configuration (headers, timeout, compression) from the standard
    `OTEL_EXPORTER_OTLP_*` variables itself.
    """
    if not endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True


def tracing() -> bool:
    """Whether a tracer provider is installed (`configure_tracing`, or by whoever embeds the proxy). Without one
    every span is a no-op that only carries its parent's ids: the proxy then skips making and describing them (its
    server span and its upstream call's), work that nobody reads."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def add_trace_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: the current trace and span ids, so a log line leads to its trace."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event["trace_id"] = format(context.trace_id, "032x")
        event["span_id"] = format(context.span_id, "016x")
    return event


class ServerSpanMiddleware:
    """One SERVER span per HTTP request, continuing the client's `traceparent` when it sends one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._fields = frozenset(name.encode("latin-1") for name in propagate.get_global_textmap().fields)
        """The request headers the propagators installed when the app is built read (by default `traceparent`,
        `tracestate` and `baggage`), as the server hands them over: lower case."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        if not tracing() and not any(name in self._fields for name, _ in headers):
            # No span would be recorded, and no client context continued (whose ids the log lines would carry).
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
        route = _route(scope)
        method = str(scope.get("method", ""))
        with _tracer.start_as_current_span(
            f"{method} {route}", kind=SpanKind.SERVER, context=propagate.extract(carrier)
        ) as span:
            span.set_attribute("http.request.method", method)
            span.set_attribute("http.route", route)

            async def traced_send(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            await self.app(scope, receive, traced_send)


def _route(scope: Scope) -> str:
    handler = scope.get("route_handler")
    paths = getattr(handler, "paths", None)
    return sorted(paths)[0] if paths else "unmatched"
