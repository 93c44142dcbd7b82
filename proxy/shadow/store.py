"""A store every replica shares (`shadow_store`, a Redis server): one shadow budget that all replicas draw from, and a
stream that every replica's records and tallies go to, which `contextlift shadow-report URL` reads.

The budget is the sliding window of `contextlift.proxy.shadow.budget`, kept on the server and checked and taken by
one Lua script, so two replicas cannot both pass the same check, and timed by the server's clock, so replicas'
clocks do not matter. While the server cannot be reached, each replica falls back to its own window (which counts
what the replica took from the shared one in the last 60 seconds), says so once in its log and in `/readyz`, and
tries the server again every `RETRY_SECONDS`; clients never wait on it (shadow work runs after their response).

redis-py (`redis.asyncio`) is imported when a store is named, never on a proxy that has none."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import structlog

from contextlift.proxy.shadow.budget import WINDOW_SECONDS, ShadowBudget
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

_TAKE = """
-- KEYS[1]: the window (a sorted set of 'id|calls|tokens' scored by time), KEYS[2]: its totals (a hash).
-- ARGV: calls limit, tokens limit, calls, tokens, id, window seconds, '1' to add whatever the totals.
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
local horizon = t - tonumber(ARGV[6])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon)
if #old > 0 then
  local calls, tokens = 0, 0
  for _, entry in ipairs(old) do
    local c, k = string.match(entry, '|(-?%d+)|(-?%d+)$')
    calls, tokens = calls + tonumber(c), tokens + tonumber(k)
  end
  redis.call('HINCRBY', KEYS[2], 'calls', -calls)
  redis.call('HINCRBY', KEYS[2], 'tokens', -tokens)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', horizon)
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])  -- nothing in the window: totals that outlived it (an eviction) start again at 0
end
local calls = tonumber(redis.call('HGET', KEYS[2], 'calls') or '0')
local tokens = tonumber(redis.call('HGET', KEYS[2], 'tokens') or '0')
local over = calls + tonumber(ARGV[3]) > tonumber(ARGV[1]) or tokens + tonumber(ARGV[4]) > tonumber(ARGV[2])
if ARGV[7] ~= '1' and over then
  return 0
end
redis.call('ZADD', KEYS[1], t, ARGV[5] .. '|' .. ARGV[3] .. '|' .. ARGV[4])
redis.call('HINCRBY', KEYS[2], 'calls', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'tokens', ARGV[4])
local ttl = math.ceil(tonumber(ARGV[6]) * 1000) + 1000
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
"""


def keys(prefix: str) -> tuple[str, str, str]:
    """The window, its totals and the records' stream under `prefix`."""
    return f"{prefix}:budget", f"{prefix}:budget:spent", f"{prefix}:records"


def where(url: str) -> str:
    """The store's address as it may be logged: its scheme, host, port and database, never its password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    return f"{parts.scheme}://{host}:{parts.port or 6379}{parts.path or '/0'}"


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
        self._window, self._totals, self.stream = keys(prefix)
        self._local = local
        self._max_records = max_records
        self._seconds = window
        self._clock = clock
        self.shared = True
        """Whether the last command reached the server (a replica starts out assuming it will)."""
        self._since = datetime.now(UTC)
        self._error = ""
        self._retry_at = 0.0

    # The budget (`contextlift.proxy.shadow.budget.Budget`).

    async def take(self, calls: int, tokens: int) -> bool:
        if self._reachable():
            try:
                taken = await self._draw(calls, tokens, force=False)
            except Exception as error:  # any failure of the store: the budget falls back, the sample goes on
                self._fell(error)
            else:
                if taken:  # remembered here, so a fall back does not start this replica from nothing
                    self._local.add(calls, tokens)
                return taken
        return self._local.take_now(calls, tokens)

    async def correct(self, reserved: int, spent: int) -> None:
        if spent == reserved:
            return
        self._local.add(0, spent - reserved)
        if self._reachable():
            try:
                await self._draw(0, spent - reserved, force=True)
            except Exception as error:
                self._fell(error)

    async def _draw(self, calls: int, tokens: int, *, force: bool) -> bool:
        args: list[str | int | float] = [self.calls_per_minute, self.tokens_per_minute, calls, tokens]
        args += [secrets.token_hex(8), self._seconds, "1" if force else "0"]
        taken = await self._take(keys=[self._window, self._totals], args=args)
        self._back()
        return bool(taken)

    # The records' stream.

    async def write(self, record: dict[str, Any]) -> bool:
        """Append `record` to the stream, trimmed to about `max_records` entries; False where the store cannot be
        reached (said once, with the fall back)."""
        if not self._reachable():
            return False
        try:
            await self._client.xadd(
                self.stream, {RECORD_FIELD: record_line(record)}, maxlen=self._max_records, approximate=True
            )
        except Exception as error:
            self._fell(error)
            return False
        self._back()
        return True

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
        state = {"state": "shared" if self.shared else "fallback", "store": self.where, "since": self._since_text()}
        return state if self.shared else {**state, "error": self._error}

    def _since_text(self) -> str:
        return self._since.isoformat(timespec="seconds")

    def may_answer(self) -> bool:
        """Whether the store is reached, or due to be asked again."""
        return self._reachable()

    def _reachable(self) -> bool:
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
