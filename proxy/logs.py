"""structlog set-up: JSON lines in production, readable lines on a terminal, secrets never written."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_SECRET_KEYS = re.compile(r"authorization|api[-_]?key|secret|token$|password|cookie", re.IGNORECASE)
_SECRET_TEXT = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+|\bsk-[A-Za-z0-9_\-]{8,}")
_REDACTED = "[redacted]"


def redact(text: str) -> str:
    """`text` with bearer tokens and OpenAI-style keys blanked out."""
    return _SECRET_TEXT.sub(lambda m: (m.group(1) or "") + _REDACTED, text)


def _redact_event(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in list(event.items()):
        if _SECRET_KEYS.search(key) and not key.endswith("_tokens"):
            event[key] = _REDACTED
        elif isinstance(value, str):
            event[key] = redact(value)
    return event


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    """Configure structlog (and the stdlib loggers uvicorn uses) once, at start-up."""
    use_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    numeric_level = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=numeric_level, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    # uvicorn's access log would repeat our summary line without the fields that matter.
    logging.getLogger("uvicorn.access").disabled = True
