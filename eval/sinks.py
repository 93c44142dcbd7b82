"""Reading shadow sinks: the records the proxy's shadow evaluation wrote (`shadow_sink`), from one sink file and
its rotated files, or a folder of them (one per replica), or the stream of a store the replicas share
(`shadow_store`, a Redis URL). A line that is not a record the readers understand (torn, not JSON, not of a record's
shape) is skipped and counted, never a traceback. Read by `contextlift shadow-report` and by `eval --replay`.

It imports only the proxy's naming of the rotated files and of the store's keys."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, Field, StringConstraints

MAX_COUNT = 10**12
"""The largest count a tally line may hold: a proxy sampling 1,000 requests a second draws fewer in thirty years. A
line past it (or below 0) is forged or torn, and skipped: added in, it would be the report's totals."""
_Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
_Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,39}$")]
"""A name as the proxy writes them (an outcome, `dropped-budget`; a probe's kind, `one-hop`): nothing in it reads as
a report's structure."""


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
    kind: _Name
    format: str
    documents: int
    runs: list[_ProbeRun]


class _Record(BaseModel):
    """What the report reads of a record: a line that does not fit is skipped and counted, never a traceback."""

    candidates: list[_Row]
    probe: _Probe | None = None
    model: str = ""
    position_sensitive: bool | None = None
    served_margin: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    """The served pipeline's first ranking's margin, where it ranked (a forged value off [0, 1] skips the line)."""
    time: str = ""
    calls: float = 0.0
    tokens: float = 0.0
    seconds: float = 0.0


class _Limits(BaseModel):
    """The settings a tally was written under (contextlift.proxy.shadow.tally.TallyLimits), whole and finite."""

    calls_per_minute: _Count = 0
    tokens_per_minute: _Count = 0
    queue: _Count = 0


class _Tally(BaseModel):
    """A `shadow-tally` line (proxy.shadow.tally): what became of every sample one process drew, so far. Every
    count is a whole number from 0 to MAX_COUNT and every outcome a proxy's name: a line that is not is skipped."""

    kind: Literal["shadow-tally"]
    run: Annotated[str, StringConstraints(max_length=64)]
    time: Annotated[str, StringConstraints(max_length=64)] = ""
    sampled: _Count
    outcomes: Annotated[dict[_Name, _Count], Field(max_length=64)]
    planned_calls: _Count = 0
    limits: _Limits = _Limits()


_TALLY_OPENING = b'{"kind":"shadow-tally"'
"""How the proxy's sink writes a tally line (compact JSON, `kind` first); a record of a sample has no `kind`."""


@dataclass(frozen=True, slots=True)
class SinkRead:
    records: list[dict[str, Any]]
    """Every well-formed record, oldest first: as written (a replay reads its `captured` part too), or only the
    fields the report reads (`read_sinks(..., whole=False)`)."""
    skipped: int
    """Lines that are not a record the report can read: torn, not JSON, not of a record's shape, too long."""
    tallies: list[dict[str, Any]] = field(default_factory=list)
    """Each process's latest tally (what became of every sample it drew), one per `run`."""


MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest line read as a record; a longer one is skipped and counted. A record holds at most one captured body
(shadow_max_body_bytes, 1 MiB by default) and its answers: this is far past any the proxy writes, and bounds what a
torn or foreign file can make the reader hold at once."""


Source = Path | str
"""A sink file or folder, or a store's URL (`redis://...`)."""
STORE_PAGE = 100
"""Stream entries read at a time, at most."""
STORE_PAGE_BYTES = 16 * 1024 * 1024
"""A page's bytes, at most (and one record more): what reading a stream holds at once whatever its entries' sizes."""


def source(text: str) -> Source:
    """A command line's source: a store's URL as it is, anything else a path.

    Raises:
        ValueError: a store's URL that cannot be read (said without repeating it: it may hold a password).
    """
    from contextlift.proxy.shadow.store import SCHEMES, url_problem

    if text.partition("://")[0] not in SCHEMES or "://" not in text:
        return Path(text)
    problem = url_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def source_name(named: Source) -> str:
    """How a report names the source: a file's name, or a store's address without its password."""
    from contextlift.proxy.shadow.store import where

    return named.name if isinstance(named, Path) else where(named)


def read_sinks(paths: Sequence[Source], *, whole: bool = True, prefix: str | None = None) -> SinkRead:
    """The records of every sink named (a file with its rotated files, a folder of `*.jsonl` sinks, or a store's URL:
    its stream under `prefix`, `shadow_store_prefix`'s default if None), each sink's oldest first. Read line by
    line (a line is split on `\n` only: a record's text can hold U+2028, U+2029 or U+0085, which `str.splitlines`
    also splits on), each decoded on its own, so a torn byte or a malformed line costs that line only. Only regular
    files are read: a FIFO or a device named `*.jsonl` in a folder is passed over (it would block the reader), and
    named on its own it is refused.

    Memory: the records kept, plus the line being read (at most MAX_LINE_BYTES). With `whole=False` a record
    keeps only the fields the report reads, a few hundred bytes per candidate, however large its captured request.

    Raises:
        ValueError: a path named that is neither a folder nor a regular file.
        OSError: a file cannot be read, or a store reached.
    """
    # The proxy's own naming of the rotated files, imported here: a benchmark run loads without the proxy.
    from contextlift.proxy.shadow.sink import sink_files

    files: list[Path] = []
    stores: list[str] = []
    for path in paths:
        if isinstance(path, str):
            stores.append(path)
            continue
        if path.is_dir():
            sinks = sorted(p for p in path.glob("*.jsonl") if _regular(p))
        elif _regular(path):
            sinks = [path]
        else:
            raise ValueError(f"{path}: not a regular file or a folder")
        files += [file for sink in sinks for file in sink_files(sink) if _regular(file)]
    reader = _Reader(whole)
    for file in files:
        reader.read(_lines(file))
    for url in stores:
        reader.read(_stream_lines(url, prefix))
    return SinkRead(reader.records, reader.skipped, list(reader.tallies.values()))


class _Reader:
    """The records and tallies of a sink's lines, the lines that are not either counted."""

    def __init__(self, whole: bool) -> None:
        self.whole = whole
        self.records: list[dict[str, Any]] = []
        self.tallies: dict[str, dict[str, Any]] = {}
        self.skipped = 0

    def read(self, lines: Iterable[bytes | None]) -> None:
        for line in lines:
            if line is None or (line.strip() and not self._add(line)):
                self.skipped += 1

    def _add(self, line: bytes) -> bool:
        if line.startswith(_TALLY_OPENING):
            try:
                tally = _Tally.model_validate_json(line).model_dump()
            except (ValueError, RecursionError):
                return False
            self.tallies[tally["run"]] = tally  # cumulative: a run's later line replaces its earlier one
            return True
        try:
            if self.whole:
                record = json.loads(line.decode("utf-8"))
                read = _Record.model_validate(record)
            else:
                read = _Record.model_validate_json(line)
        except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError, ValidationError
            return False
        # The fields the report reads, as the types it reads them as; the rest (`captured`) as written.
        self.records.append({**record, **read.model_dump()} if self.whole else read.model_dump())
        return True


def _regular(path: Path) -> bool:
    """Whether `path` is a regular file (a symbolic link to one included), without opening it."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def _lines(path: Path) -> Iterator[bytes | None]:
    """The file's lines, without their `\n`; None for a line longer than MAX_LINE_BYTES (its bytes are read past,
    never held). Opened without blocking and checked again once open, so a file swapped for a FIFO after the
    folder was listed is refused rather than waited on."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError(f"{path}: not a regular file")
        while line := file.readline(MAX_LINE_BYTES + 1):
            if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
                yield line.removesuffix(b"\n")
                continue
            while (rest := file.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield None


def _stream_lines(url: str, prefix: str | None) -> Iterator[bytes | None]:
    """The lines of a store's stream, oldest first, a page at a time (`STORE_PAGE` entries, `STORE_PAGE_BYTES` at
    most, the server leaving out any entry over MAX_LINE_BYTES: `PAGE_SCRIPT`); None for an entry that is not a line
    the proxy writes.

    Raises:
        OSError: the store cannot be reached or read (said without its password, nor the server's own words).
    """
    import redis

    from contextlift.proxy.settings import Settings
    from contextlift.proxy.shadow.store import PAGE_SCRIPT, keys, where

    stream = keys(prefix or Settings.model_fields["shadow_store_prefix"].default)[1]
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=60)
    page = client.register_script(PAGE_SCRIPT)
    start = "-"
    try:
        while True:
            try:
                args: list[str | int] = [start, STORE_PAGE, MAX_LINE_BYTES, STORE_PAGE_BYTES]
                entries = cast(list[list[Any]], page(keys=[stream], args=args))
            except redis.RedisError as error:
                raise OSError(f"{where(url)}: cannot read {stream}: {type(error).__name__}") from None
            for _, line in entries:
                yield line if isinstance(line, bytes) else None
            if not entries:
                return
            start = "(" + entries[-1][0].decode()
    finally:
        client.close()


def read_sink(path: Path) -> SinkRead:
    """The records of one sink (see `read_sinks`)."""
    return read_sinks([path])


def sink_records(path: Path) -> list[dict[str, Any]]:
    """Every record of the sink and its rotated files, oldest first; lines that are not records are skipped."""
    return read_sink(path).records
