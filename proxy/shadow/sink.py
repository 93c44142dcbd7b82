"""Where shadow records go: one JSON object per line in a file rotated by size. The standard library's
`RotatingFileHandler` does the rotation (a solved problem); records are written from a worker thread.

A line is ASCII (`ensure_ascii`): a client's text holding U+2028, U+2029 or U+0085, which some line readers
split on, is escaped, so a record is exactly one line whatever reads it. A write that fails (a full disk) raises
`OSError` to the caller instead of going to `logging`'s error handler, which prints the whole record, captured
prompt included, to standard error."""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import os
import socket
import threading
from pathlib import Path
from typing import Any

BACKUPS = 3
HOST = "{host}"
"""Stands for the machine's host name in `shadow_sink`: the replicas of a Deployment (a pod's host name is its
name) writing to one shared volume each write a file of their own, which `contextlift shadow-report FOLDER`
reads together."""


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """Each file of the sink readable by its owner only: captured requests are users' content."""

    def _open(self) -> Any:
        descriptor = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(descriptor, self.mode, encoding=self.encoding)

    def handleError(self, record: logging.LogRecord) -> None:
        """Raise the write's error to `ShadowSink.write`, never print the record (users' content)."""
        raise  # called by `emit` from inside its `except` block: the error being handled


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
        self._torn = False
        """A write failed: part of its line may be in the file, so the next line starts on a line of its own."""

    def write(self, record: dict[str, Any]) -> None:
        """Blocking file I/O: call it from a worker thread.

        Raises:
            OSError: the line could not be written (the file is reopened on the next write).
        """
        line = record_line(record)
        with self._lock:
            if self._closed:
                return
            try:
                self._handler.emit(logging.makeLogRecord({"msg": ("\n" if self._torn else "") + line, "args": None}))
                self._torn = False
            except OSError:
                self._torn = True
                self._drop_stream()
                raise

    def _drop_stream(self) -> None:
        """Forget the open file and what its buffer holds of the failed line; the handler reopens it lazily."""
        stream, self._handler.stream = self._handler.stream, None
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._handler.close()


def record_line(record: dict[str, Any]) -> str:
    """The record as one line of compact ASCII JSON, as every sink writes it (see the module's docstring)."""
    return json.dumps(record, ensure_ascii=True, separators=(",", ":"))


def sink_path(path: Path) -> Path:
    """`path` with `{host}` replaced by this machine's host name (made safe for a file name)."""
    host = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())[:100] or "host"
    return Path(str(path).replace(HOST, host))


def sink_files(path: Path) -> list[Path]:
    """The sink's files, oldest first (`path.3` ... `path.1`, then `path`), those that exist."""
    rotated = [path.with_name(f"{path.name}.{i}") for i in range(BACKUPS, 0, -1)]
    return [p for p in (*rotated, path) if p.exists()]
