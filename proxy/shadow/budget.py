"""What shadow evaluation may spend: upstream calls and tokens per minute (`shadow_calls_per_minute`,
`shadow_tokens_per_minute`), and whether it may call at all without an operator key."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from urllib.parse import urlsplit


class ShadowBudget:
    """Shadow calls and tokens per minute. A sample reserves its calls and an estimate of its tokens before it
    runs (so concurrent workers cannot all pass the same check), the estimate is corrected once it has run, and
    what a sample overspent is carried into the next minute as debt rather than forgotten."""

    def __init__(self, calls_per_minute: int, tokens_per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.calls_per_minute = self._calls_limit = calls_per_minute
        self.tokens_per_minute = self._tokens_limit = tokens_per_minute
        self._clock = clock
        self._window = -1
        self._calls = 0
        self._tokens = 0

    def take(self, calls: int, tokens: int) -> bool:
        """Reserve `calls` and `tokens` in this minute, if both fit."""
        self._roll()
        if self._calls + calls > self._calls_limit or self._tokens + tokens > self._tokens_limit:
            return False
        self._calls += calls
        self._tokens += tokens
        return True

    def correct(self, reserved: int, spent: int) -> None:
        """The sample spent `spent` tokens where it reserved `reserved`."""
        self._roll()
        self._tokens += spent - reserved

    def _roll(self) -> None:
        window = int(self._clock() // 60)
        if window != self._window:
            self._window, self._calls = window, 0
            self._tokens = max(0, self._tokens - self._tokens_limit)  # the overspend carries over


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
