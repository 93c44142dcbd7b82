"""`contextlift detect`: what the proxy finds in a request body, printed for a person debugging their prompt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from proxy.edge.intake import check_chat_body, parse_json_object
from proxy.errors import ProxyError
from proxy.settings import Settings
from strategies import DocumentLimitError, DocumentLimits, explain_detection, render_explanation


def detect_command(path: Path | None, shape: str | None, *, as_json: bool, settings: Settings) -> int:
    """Read a chat-completions body from `path` (standard input when None), print detection's findings.

    Returns 0, or 2 when the body cannot be read or is not a chat-completions body.
    """
    try:
        raw = path.read_bytes() if path is not None else sys.stdin.buffer.read()
    except OSError as error:
        print(f"contextlift detect: cannot read {path}: {error.strerror}", file=sys.stderr)
        return 2
    declared = tuple(f.declared() for f in settings.document_formats)
    limits = DocumentLimits(settings.max_documents, settings.max_document_bytes)
    try:
        body = parse_json_object(raw)
        check_chat_body(body)
        found = explain_detection(body, limits=limits, declared=declared, shape=shape)
    except ProxyError as error:
        print(f"contextlift detect: {error.message}", file=sys.stderr)
        return 2
    except DocumentLimitError as error:
        print(f"contextlift detect: {error}", file=sys.stderr)
        return 2
    print(json.dumps(found, ensure_ascii=False, indent=2) if as_json else render_explanation(found), end="")
    return 0
