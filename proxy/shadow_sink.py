"""Where shadow records go: one JSON object per line in a file rotated by size. The standard library's
`RotatingFileHandler` does the rotation (a solved problem); records are written from a worker thread."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import threading
from pathlib import Path
from typing import Any

BACKUPS = 3


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """Each file of the sink readable by its owner only: captured requests are users' content."""

    def _open(self) -> Any:
        descriptor = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(descriptor, self.mode, encoding=self.encoding)


class ShadowSink:
    """Appends records to `path`; at `max_bytes` the file becomes `path.1` (and so on, `BACKUPS` kept)."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._handler = _PrivateRotatingFile(
            path, maxBytes=max_bytes, backupCount=BACKUPS, encoding="utf-8", delay=True
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        # A write cancelled at shutdown still runs to its end in its worker thread: after `close` it must not
        # reopen the file (the handler opens it lazily), so writes and the close take turns and a closed sink
        # drops what comes late.
        self._lock = threading.Lock()
        self._closed = False

    def write(self, record: dict[str, Any]) -> None:
        """Blocking file I/O: call it from a worker thread."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            if not self._closed:
                self._handler.emit(logging.makeLogRecord({"msg": line, "args": None}))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._handler.close()


def sink_files(path: Path) -> list[Path]:
    """The sink's files, oldest first (`path.3` ... `path.1`, then `path`), those that exist."""
    rotated = [path.with_name(f"{path.name}.{i}") for i in range(BACKUPS, 0, -1)]
    return [p for p in (*rotated, path) if p.exists()]
