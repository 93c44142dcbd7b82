"""The response cache: one JSON line per answered request, keyed by the request and the strategy, so an
interrupted run resumes where it stopped and a re-run only re-scores."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, TextIO


def request_key(model: str, strategy: str, body: dict[str, Any]) -> str:
    """Names one request: the same model, strategy and body always give the same key."""
    payload = json.dumps([model, strategy, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    """Entries appended as answers arrive and flushed at once, so a killed run loses at most the requests in
    flight. A torn last line (the process killed mid-write) is skipped on load."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    self._entries[entry["key"]] = entry
        self._handle: TextIO | None = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._entries.get(key)

    def put(self, entry: dict[str, Any]) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            needs_newline = self.path.exists() and self.path.stat().st_size > 0 and not _ends_with_newline(self.path)
            self._handle = self.path.open("a", encoding="utf-8")
            if needs_newline:
                self._handle.write("\n")
        self._entries[entry["key"]] = entry
        self._handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"
