"""Reading shadow sinks: the records the proxy's shadow evaluation wrote (`shadow_sink`), from one sink file and
its rotated files, or a folder of them (one per replica). A line that is not a record the readers understand (torn,
not JSON, not of a record's shape) is skipped and counted, never a traceback. Read by `contextlift shadow-report`
and by `eval --replay`.

It imports only the proxy's naming of the rotated files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel


class _Row(BaseModel):
    """What the report reads of a candidate's row; anything else in it is left alone."""

    strategy: str
    agrees: bool
    exact: bool
    error: str | None = None
    calls: float
    tokens: float
    seconds: float


class _ProbeRun(BaseModel):
    strategy: str
    position: Literal["first", "middle", "last"]
    correct: bool
    error: str | None = None
    calls: float = 0.0
    seconds: float = 0.0


class _Probe(BaseModel):
    kind: str
    format: str
    documents: int
    runs: list[_ProbeRun]


class _Record(BaseModel):
    """What the report reads of a record: a line that does not fit is skipped and counted, never a traceback."""

    candidates: list[_Row]
    probe: _Probe | None = None
    model: str = ""
    position_sensitive: bool | None = None
    time: str = ""
    calls: float = 0.0
    tokens: float = 0.0
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class SinkRead:
    records: list[dict[str, Any]]
    """Every well-formed record, oldest first, as written (a replay reads its `captured` part too)."""
    skipped: int
    """Lines that are not a record the report can read: torn, not JSON, not of a record's shape."""


def read_sinks(paths: Sequence[Path]) -> SinkRead:
    """The records of every sink named (a file with its rotated files, or a folder of `*.jsonl` sinks), each
    sink's oldest first. Lines are split on `\\n` only (a record's text can hold U+2028, U+2029 or U+0085, which
    `str.splitlines` also splits on), each decoded on its own, so a torn byte or a malformed line costs that line
    only."""
    # The proxy's own naming of the rotated files, imported here: a benchmark run loads without the proxy.
    from proxy.shadow.sink import sink_files

    files = []
    for path in paths:
        sinks = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        files += [file for sink in sinks for file in sink_files(sink)]
    records, skipped = [], 0
    for file in files:
        for line in file.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
                read = _Record.model_validate(record)
            except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError, ValidationError
                skipped += 1
                continue
            # The fields the report reads, as the types it reads them as; the rest (`captured`) as written.
            records.append({**record, **read.model_dump()})
    return SinkRead(records, skipped)


def read_sink(path: Path) -> SinkRead:
    """The records of one sink (see `read_sinks`)."""
    return read_sinks([path])


def sink_records(path: Path) -> list[dict[str, Any]]:
    """Every record of the sink and its rotated files, oldest first; lines that are not records are skipped."""
    return read_sink(path).records
