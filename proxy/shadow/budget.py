"""What shadow evaluation may spend: upstream calls and tokens in any 60 seconds (`shadow_calls_per_minute`,
`shadow_tokens_per_minute`), and whether it may call at all without an operator key.

The budget is a sliding window of reservations: a sample reserves its calls and an estimate of its tokens before it
runs, and fits when the reservations of the last 60 seconds plus its own stay within both limits. Once it has run,
its reservation is corrected to the tokens it spent, in place: what a sample spent counts from the time it was
reserved, for 60 seconds, and a correction never outlives its reservation. The same window is kept in this process
(`ShadowBudget`, one replica) or on a Redis server every replica draws from (`contextlift.proxy.shadow.store`), so one
replica and many read the same way. A window of fixed clock minutes would let twice the budget through across a
minute's boundary."""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

WINDOW_SECONDS = 60.0
MAX_TOKENS = 10**9
"""The most tokens one reservation counts: an upstream's usage is its word, and a count past any real call's (or
below zero) must neither fill the window for good nor make room in it."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """One sample's place in the window."""

    id: str
    calls: int
    tokens: int

    @property
    def entry(self) -> str:
        """How the shared window names it: `id|calls|tokens`."""
        return f"{self.id}|{self.calls}|{self.tokens}"


def reservation(calls: int, tokens: int) -> Reservation:
    return Reservation(secrets.token_hex(8), max(0, calls), bounded(tokens))


def bounded(tokens: int) -> int:
    return max(0, min(int(tokens), MAX_TOKENS))


class Budget(Protocol):
    """What the shadow workers draw on: a reservation before a sample runs, its correction after."""

    calls_per_minute: int
    tokens_per_minute: int

    async def take(self, calls: int, tokens: int) -> Reservation | None:
        """Reserve `calls` and `tokens` now, if both fit in the window; None where they do not."""
        ...

    async def correct(self, taken: Reservation, spent: int) -> None:
        """The sample of `taken` spent `spent` tokens: its reservation counts them instead of the estimate."""
        ...


class ShadowBudget:
    """Shadow calls and tokens in any 60 seconds, for this process."""

    def __init__(
        self,
        calls_per_minute: int,
        tokens_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
        window: float = WINDOW_SECONDS,
    ) -> None:
        self.calls_per_minute = calls_per_minute
        self.tokens_per_minute = tokens_per_minute
        self._clock = clock
        self._seconds = window
        self._entries: deque[list[float | int | str]] = deque()
        """[time, calls, tokens, id], oldest first."""
        self._by_id: dict[str, list[float | int | str]] = {}
        self._calls = 0
        self._tokens = 0

    async def take(self, calls: int, tokens: int) -> Reservation | None:
        return self.take_now(calls, tokens)

    async def correct(self, taken: Reservation, spent: int) -> None:
        self.correct_now(taken, spent)

    def take_now(self, calls: int, tokens: int) -> Reservation | None:
        """`take`, without waiting: the window is in this process."""
        self._expire()
        taken = reservation(calls, tokens)
        if self._calls + taken.calls > self.calls_per_minute or self._tokens + taken.tokens > self.tokens_per_minute:
            return None
        self.add(taken)
        return taken

    def add(self, taken: Reservation) -> None:
        """Count `taken` now, whether it fits or not: a reservation the shared budget granted, so that a replica
        falling back to this window remembers its own recent spending."""
        self._expire()
        entry: list[float | int | str] = [self._clock(), taken.calls, taken.tokens, taken.id]
        self._entries.append(entry)
        self._by_id[taken.id] = entry
        self._calls += taken.calls
        self._tokens += taken.tokens

    def correct_now(self, taken: Reservation, spent: int) -> None:
        """Where `taken` is still in the window, it counts `spent` tokens from now on."""
        self._expire()
        entry = self._by_id.get(taken.id)
        if entry is not None:
            tokens = bounded(spent)
            self._tokens += tokens - int(entry[2])
            entry[2] = tokens

    def _expire(self) -> None:
        horizon = self._clock() - self._seconds
        while self._entries and float(self._entries[0][0]) <= horizon:
            _, calls, tokens, entry_id = self._entries.popleft()
            del self._by_id[str(entry_id)]
            self._calls -= int(calls)
            self._tokens -= int(tokens)


def local_upstream(url: str) -> bool:
    """Whether `url` is on this machine (a loopback name or address). `contextlift eval` runs a large run against
    one without asking first. Shadow calls do not read it: a local gateway may still bill a paid API per call."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
