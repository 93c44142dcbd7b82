"""A store every replica shares (`shadow_store`, a Redis server): one shadow budget that all replicas draw from, and a
stream that every replica's records and tallies go to, which `contextlift shadow-report URL` reads.

The budget is the sliding window of `contextlift.proxy.shadow.budget`, kept on the server and checked and taken by
one Lua script, so two replicas cannot both pass the same check, and timed by the server's clock, so replicas'
clocks do not matter. While the server cannot be reached, each replica falls back to its own window (which counts
what the replica took from the shared one in the last 60 seconds), says so once in its log and in `/readyz`, and
tries the server again every `RETRY_SECONDS`; clients never wait on it (shadow work runs after their response).

redis-py (`redis.asyncio`) is imported when a store is named, never on a proxy that has none."""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import structlog

from contextlift.proxy.shadow.budget import WINDOW_SECONDS, Reservation, ShadowBudget, bounded, reservation
from contextlift.proxy.shadow.sink import record_line

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = structlog.get_logger("contextlift.shadow")

SCHEMES = ("redis", "rediss", "unix")
TIMEOUT_SECONDS = 1.0
"""Longest a shadow worker waits on the store for one command (connecting, or an answer) before it falls back: a
server that stopped answering costs a worker a second, never a client."""
RETRY_SECONDS = 5.0
"""How long a replica that fell back keeps its own budget before it tries the store again."""
RECORD_FIELD = "r"
"""The stream entry's one field: the record's JSON line, as the file sink writes it."""
MAX_STREAM_RECORD_BYTES = 256 * 1024
"""Longest record the stream takes whole: past it (a captured request, with shadow_capture), the stream's copy leaves
`captured` out (the file sink keeps it), so the stream's memory is its length times this at most."""

_TAKE = """
-- KEYS[1]: the window, a sorted set of reservations 'id|calls|tokens' scored by the server's time.
-- ARGV: calls limit, tokens limit, the reservation's entry, its calls, its tokens, the window in seconds.
-- The totals are summed from the entries on every call (at most one per sample in the window): no second key that
-- an eviction or a failed write could leave out of step with them.
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - tonumber(ARGV[6]))
local calls, tokens = 0, 0
for _, entry in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local c, k = string.match(entry, '|(%d+)|(%d+)$')
  if c then calls, tokens = calls + tonumber(c), tokens + tonumber(k) end
end
if calls + tonumber(ARGV[4]) > tonumber(ARGV[1]) or tokens + tonumber(ARGV[5]) > tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], t, ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[6]) * 1000) + 1000)
return 1
"""
_CORRECT = """
-- KEYS[1]: the window. ARGV: a reservation's entry, the same reservation with the tokens it spent. Kept at its own
-- time, so a correction leaves the window with its reservation; one already gone is not counted again.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[1], score, ARGV[2])
end
return 1
"""
PAGE_SCRIPT = """
-- KEYS[1]: the records' stream. ARGV: the first id (exclusive as '(id'), the most entries, the longest record
-- returned whole, the most bytes a page holds. Each entry comes back as {id, record}, the record false where it is
-- missing or longer than ARGV[3]: a reader's memory is a page's bytes, whatever the stream holds.
local out, bytes = {}, 0
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])) do
  local record = false
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'r' and #fields[i + 1] <= tonumber(ARGV[3]) then record = fields[i + 1] end
  end
  out[#out + 1] = {entry[1], record}
  if record then bytes = bytes + #record end
  if bytes >= tonumber(ARGV[4]) then break end
end
return out
"""


def keys(prefix: str) -> tuple[str, str]:
    """The budget's window and the records' stream under `prefix`."""
    return f"{prefix}:budget", f"{prefix}:records"


def url_problem(url: str) -> str | None:
    """Why `url` is not a store's URL, said without repeating any of it (it may hold a password); None where it is."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in SCHEMES or not (parts.path if parts.scheme == "unix" else parts.hostname):
        return (
            "not a Redis URL: redis://[:password@]host:port/db, rediss://... or unix:///path; a password holding "
            "'/', '?', '#' or '@' must be percent-encoded"
        )
    return None


def where(url: str) -> str:
    """The store's address as it may be logged: its scheme, host, port and database, never its password."""
    if url_problem(url) is not None:
        return "(a store URL that cannot be read)"
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}{parts.path or '/0'}"


def connect(url: str, max_connections: int) -> Redis:
    """A client for `url` that gives up on a command after TIMEOUT_SECONDS and never retries on its own (the
    budget falls back instead). Its pool waits for a free connection (up to TIMEOUT_SECONDS) rather than failing at
    once when every connection is busy."""
    from redis.asyncio import BlockingConnectionPool, Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=TIMEOUT_SECONDS,
        socket_connect_timeout=TIMEOUT_SECONDS,
        socket_timeout=TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 0),
        client_name="contextlift-shadow",
    )
    return Redis(connection_pool=pool)


class ShadowStore:
    """The shared budget and the records' stream on one server, and whether this replica reaches it."""

    def __init__(
        self,
        url: str,
        prefix: str,
        local: ShadowBudget,
        *,
        max_records: int,
        max_connections: int,
        window: float = WINDOW_SECONDS,
        clock: Any = time.monotonic,
    ) -> None:
        self.where = where(url)
        self.calls_per_minute = local.calls_per_minute
        self.tokens_per_minute = local.tokens_per_minute
        self._client = connect(url, max_connections)
        self._take = self._client.register_script(_TAKE)
        self._correct = self._client.register_script(_CORRECT)
        self._window, self.stream = keys(prefix)
        self._local = local
        self._max_records = max_records
        self._seconds = window
        self._clock = clock
        self.shared = True
        """Whether the last command reached the server (a replica starts out assuming it will)."""
        self._since = datetime.now(UTC)
        self._error = ""
        self._retry_at = 0.0
        self._refusal = ""
        """The last kind of refusal said (a full server), so a run of them is said once."""

    # The budget (`contextlift.proxy.shadow.budget.Budget`).

    async def take(self, calls: int, tokens: int) -> Reservation | None:
        if self.may_answer():
            taken = reservation(calls, tokens)
            limits: list[str | int | float] = [self.calls_per_minute, self.tokens_per_minute]
            args = [*limits, taken.entry, taken.calls, taken.tokens, self._seconds]
            try:
                granted = await self._take(keys=[self._window], args=args)
            except Exception as error:  # any failure of the store: the budget falls back, the sample goes on
                self._fell(error)
            else:
                self._back()
                if not granted:
                    return None
                self._local.add(taken)  # remembered here, so a fall back does not start this replica from nothing
                return taken
        return self._local.take_now(calls, tokens)

    async def correct(self, taken: Reservation, spent: int) -> None:
        self._local.correct_now(taken, spent)
        if self.may_answer():
            spent_entry = Reservation(taken.id, taken.calls, bounded(spent)).entry
            try:
                await self._correct(keys=[self._window], args=[taken.entry, spent_entry])
            except Exception as error:
                self._fell(error)
            else:
                self._back()

    # The records' stream.

    async def write(self, record: dict[str, Any]) -> bool:
        """Append `record` to the stream, trimmed to about `max_records` entries; False where the store cannot be
        reached (said once, with the fall back)."""
        if not self.may_answer():
            return False
        line = record_line(record)
        if len(line) > MAX_STREAM_RECORD_BYTES and "captured" in record:
            line = record_line({**record, "captured": "in shadow_sink"})
        from redis.exceptions import ConnectionError as NoConnection
        from redis.exceptions import TimeoutError as NoAnswer

        try:
            await self._client.xadd(self.stream, {RECORD_FIELD: line}, maxlen=self._max_records, approximate=True)
        except (NoConnection, NoAnswer, OSError) as error:
            self._fell(error)
            return False
        except Exception as error:  # the server answered, and refused: full (OOM), or the key is not a stream
            await self._refused(error)
            return False
        self._back()
        return True

    async def _refused(self, error: Exception) -> None:
        """A record the server refused: said once per kind of refusal. A full server (`maxmemory` with
        `noeviction`) gets room back from the stream's oldest tenth, which it allows even then: left alone, it would
        refuse every record from then on, as the stream's bound never trims a stream it cannot add to."""
        kind = type(error).__name__
        if kind != self._refusal:
            self._refusal = kind
            log.warning("shadow store refused a record", store=self.where, error=kind)
        from redis.exceptions import OutOfMemoryError

        if isinstance(error, OutOfMemoryError):
            with contextlib.suppress(Exception):
                length = await self._client.xlen(self.stream)
                await self._client.xtrim(self.stream, maxlen=length - max(1, length // 10), approximate=False)

    # Whether it is reached.

    async def check(self) -> None:
        """Ask the server once (at start-up), so a store that cannot be reached is said at once."""
        try:
            await self._client.ping()
        except Exception as error:
            self._fell(error)
        else:
            log.info("shadow store shared", store=self.where)

    def status(self) -> dict[str, Any]:
        """What `/readyz` says of the store: shared, or fallen back to this replica's budget since when and why."""
        since = self._since.isoformat(timespec="seconds")
        state = {"state": "shared" if self.shared else "fallback", "store": self.where, "since": since}
        return state if self.shared else {**state, "error": self._error}

    def may_answer(self) -> bool:
        """Whether the store is reached, or due to be asked again."""
        return self.shared or self._clock() >= self._retry_at

    def _fell(self, error: Exception) -> None:
        self._retry_at = self._clock() + RETRY_SECONDS
        if not self.shared:
            return
        self.shared = False
        self._since = datetime.now(UTC)
        self._error = type(error).__name__
        log.warning(
            "shadow budget falls back to this replica's",
            store=self.where,
            error=self._error,
            meaning="until the store answers again, each replica spends up to the whole shadow budget, and records "
            "reach only shadow_sink where one is set",
        )

    def _back(self) -> None:
        if self.shared:
            return
        self.shared = True
        self._since = datetime.now(UTC)
        log.warning("shadow budget shared again", store=self.where)

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._client.connection_pool.disconnect()
