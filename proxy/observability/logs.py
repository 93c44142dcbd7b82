"""structlog set-up: JSON lines in production, readable lines on a terminal, secrets never written."""

from __future__ import annotations

import functools
import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from contextlift.proxy.observability.telemetry import add_trace_ids

_SECRET_KEYS = re.compile(r"authorization|api[-_]?key|secret|token$|password|cookie", re.IGNORECASE)
_SECRET_TEXT = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+|\bsk-[A-Za-z0-9_\-]{8,}")
_REDACTED = "[redacted]"


def redact(text: str) -> str:
    """`text` with bearer tokens and OpenAI-style keys blanked out."""
    return _SECRET_TEXT.sub(lambda m: (m.group(1) or "") + _REDACTED, text)


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    """Whether a field's name says it holds a secret; cached, as a process logs the same few dozen names (a
    request line has 19 fields, each searched)."""
    return bool(_SECRET_KEYS.search(key)) and not key.endswith("_tokens")


def _redact_event(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event.items()):
        if _secret_key(key):
            event[key] = _REDACTED
        elif isinstance(value, str):
            event[key] = redact(value)
    return event


def configure_logging(log_format: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog (and the stdlib loggers uvicorn uses) once, at start-up; lines go to `stream`
    (standard error by default)."""
    stream = stream or sys.stderr
    use_json = log_format == "json" or (log_format == "auto" and not stream.isatty())
    renderer: Any = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    numeric_level = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        add_trace_ids,
        _redact_event,
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    # Third-party stdlib loggers (uvicorn, httpx) go through the same processors, so every line is alike.
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric_level)
    # httpx logs every request at INFO: the summary line already says it. uvicorn's access log likewise.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True
