"""What shadow evaluation may spend: upstream calls and tokens in any 60 seconds (`shadow_calls_per_minute`,
`shadow_tokens_per_minute`), and whether it may call at all without an operator key.

The budget is a sliding window: every sample's reservation (and each later correction of its token estimate) is
an entry with its time, and a sample fits when the entries of the last 60 seconds plus its own stay within both
limits. The same window is kept in this process (`ShadowBudget`, one replica) or on a Redis server that every
replica draws from (`contextlift.proxy.shadow.store.SharedBudget`), so one replica and many read the same way. A
window of fixed clock minutes would let twice the budget through across a minute's boundary."""

from __future__ import annotations

import ipaddress
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

WINDOW_SECONDS = 60.0


class Budget(Protocol):
    """What the shadow workers draw on: a reservation before a sample runs, a correction after."""

    calls_per_minute: int
    tokens_per_minute: int

    async def take(self, calls: int, tokens: int) -> bool:
        """Reserve `calls` and `tokens` now, if both fit in the window."""
        ...

    async def correct(self, reserved: int, spent: int) -> None:
        """The sample spent `spent` tokens where it reserved `reserved`."""
        ...


class ShadowBudget:
    """Shadow calls and tokens in any 60 seconds, for this process. A sample reserves its calls and an estimate of
    its tokens before it runs (so concurrent workers cannot all pass the same check), the estimate is corrected
    once it has run, and what a sample overspent stays in the window as debt for the next 60 seconds."""

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
        self._entries: deque[tuple[float, int, int]] = deque()
        self._calls = 0
        self._tokens = 0

    async def take(self, calls: int, tokens: int) -> bool:
        return self.take_now(calls, tokens)

    async def correct(self, reserved: int, spent: int) -> None:
        if spent != reserved:
            self.add(0, spent - reserved)

    def take_now(self, calls: int, tokens: int) -> bool:
        """`take`, without waiting: the window is in this process."""
        self._expire()
        if self._calls + calls > self.calls_per_minute or self._tokens + tokens > self.tokens_per_minute:
            return False
        self.add(calls, tokens)
        return True

    def add(self, calls: int, tokens: int) -> None:
        """Count `calls` and `tokens` as spent now, whether they fit or not (a correction; a reservation the shared
        budget granted, so that a replica falling back to this one remembers its own recent spending)."""
        self._expire()
        self._entries.append((self._clock(), calls, tokens))
        self._calls += calls
        self._tokens += tokens

    def _expire(self) -> None:
        horizon = self._clock() - self._seconds
        while self._entries and self._entries[0][0] <= horizon:
            _, calls, tokens = self._entries.popleft()
            self._calls -= calls
            self._tokens -= tokens


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
