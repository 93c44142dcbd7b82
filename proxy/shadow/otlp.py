"""Shadow records as OpenTelemetry log records (`shadow_otlp_logs`), exported over OTLP/HTTP to the collector the
standard `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` names, so they reach the log store a
team already watches (Loki, Elasticsearch, a vendor's) beside the proxy's traces.

One log record per sample (`event.name` `contextlift.shadow.sample`) and per tally (`contextlift.shadow.tally`): its
body is the record's JSON line as the file sink writes it but for a captured request and answers (`shadow_capture`),
which stay in the file sink: a log record stays a few kilobytes. Its attributes are the fields a log query filters
on, named by OpenTelemetry's GenAI conventions where one fits (`gen_ai.operation.name`, `gen_ai.request.model`).

The SDK's batch processor queues records (QUEUE of them at most: past that, new ones are dropped) and exports them from
its own thread, each export given up after EXPORT_SECONDS: emitting never waits on the collector, and shutdown waits
for one export at most. A record the collector never took is lost (the SDK logs the failed export); the file sink and
the store's stream are the copies a report can count on."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from contextlift.proxy.shadow.sink import record_line
from contextlift.proxy.shadow.tally import KIND

if TYPE_CHECKING:
    from opentelemetry.sdk._logs.export import LogRecordExporter

QUEUE = 512
EXPORT_SECONDS = 5.0
SAMPLE_EVENT = "contextlift.shadow.sample"
TALLY_EVENT = "contextlift.shadow.tally"


class OtlpSink:
    """Hands each record to the SDK's batch exporter."""

    def __init__(self, service_name: str, exporter: LogRecordExporter | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        # A provider of its own, not the global one: whoever embeds the proxy keeps theirs.
        self._provider = LoggerProvider(resource=Resource.create({"service.name": service_name}))
        exporter = exporter or OTLPLogExporter(timeout=EXPORT_SECONDS)
        batches = BatchLogRecordProcessor(
            exporter,
            max_queue_size=QUEUE,
            max_export_batch_size=QUEUE,
            export_timeout_millis=int(EXPORT_SECONDS * 1000),
        )
        self._provider.add_log_record_processor(batches)
        self._logger = self._provider.get_logger("contextlift.shadow")

    def write(self, record: dict[str, Any]) -> None:
        from opentelemetry._logs import SeverityNumber

        tally = record.get("kind") == KIND
        self._logger.emit(
            timestamp=time.time_ns(),
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=record_line({k: v for k, v in record.items() if k != "captured"}),
            attributes=_attributes(record, tally),
            event_name=TALLY_EVENT if tally else SAMPLE_EVENT,
        )

    def close(self) -> None:
        """Export what is queued and stop (blocking, up to the exporter's timeout: call it from a worker thread)."""
        self._provider.shutdown()


def _attributes(record: dict[str, Any], tally: bool) -> dict[str, str | int | float | bool]:
    """The fields a log query filters on; a field the record lacks (or holds as null) is left out."""
    if tally:
        fields = {"contextlift.shadow.run": record.get("run"), "contextlift.shadow.sampled": record.get("sampled")}
    else:
        fields = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": record.get("model") or None,
            "contextlift.shadow.served": record.get("served"),
            "contextlift.shadow.format": record.get("format"),
            "contextlift.shadow.documents": record.get("documents"),
            "contextlift.shadow.position_sensitive": record.get("position_sensitive"),
            "contextlift.shadow.probe": (record.get("probe") or {}).get("kind"),
        }
    return {k: v for k, v in fields.items() if isinstance(v, str | int | float | bool)}
