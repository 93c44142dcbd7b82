"""When and how long to wait before trying an upstream call again.

Retried: 429, 500, 502, 503 and 504 answers, refused connections and connections broken before an answer,
with jittered exponential backoff, at most `max_retries` times. A `Retry-After` (or `retry-after-ms`) within
`max_retry_after` is honoured instead of the backoff; a longer one is the client's to see at once. Never
retried: other statuses (the request itself is wrong), timeouts (the deadline is spent), faults the same request
would meet again (below), and anything after the first byte of a stream reached the client. A client asks for
fewer retries with `X-Context-Retries` (see `contextlift.proxy.upstream.headers.requested_retries`).

Deterministic upstream faults, each a 502 at the first attempt:
- an answer that is not valid HTTP (an unasked 101, more than 256 headers, a head line over 64 KiB): the parser
  refuses the same bytes every time, and each attempt is a whole call the upstream may bill;
- a redirect: it would be the same redirect, and it is never followed (see `contextlift.proxy.upstream.client`);
- a connection broken after the answer began (`UpstreamAnswerCutOff`): the upstream accepted the call and spent
  the tokens; what cut it (the prompt, the answer's size) most likely cuts the next attempt at the same point.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from contextlift.proxy.errors import (
    UpstreamAnswerCutOff,
    UpstreamConnectionLost,
    UpstreamError,
    UpstreamStatusError,
    UpstreamUnreachable,
)

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 2
    """Attempts after the first; every attempt counts as an upstream call."""
    backoff: float = 0.5
    """Seconds before the first retry; doubled for each further one, then jittered down by up to half."""
    max_backoff: float = 8.0
    max_retry_after: float = 10.0
    """Longest `Retry-After` the proxy waits out itself; a client with a tighter budget can always lower it."""

    def delay(self, retry: int, error: UpstreamError) -> float | None:
        """Seconds to wait before retry number `retry` (from 1) after `error`, or None: do not retry."""
        if retry > self.max_retries:
            return None
        if isinstance(error, UpstreamStatusError):
            if error.upstream_status not in RETRYABLE_STATUSES:
                return None
            after = retry_after_seconds(error.headers)
            if after is not None:
                return after if after <= self.max_retry_after else None
        elif not isinstance(error, UpstreamUnreachable | UpstreamConnectionLost):
            return None  # timeouts, malformed answers and redirects: see the module docstring
        elif isinstance(error, UpstreamAnswerCutOff):
            return None  # lost after the answer began: billed, and likely to break the same way again
        ceiling = min(self.max_backoff, self.backoff * float(2 ** (retry - 1)))
        return ceiling * random.uniform(0.5, 1.0)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait an upstream asked for, from `retry-after-ms` or `retry-after` (seconds or an HTTP date).

    None when neither is there or the value is not a finite, non-negative number or a date: a `nan`, `-inf`
    or `-5000` must not remove the backoff, so the caller falls back to it.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            milliseconds = _finite_non_negative(float(lowered["retry-after-ms"]))
        except ValueError:
            milliseconds = None
        if milliseconds is not None:
            return milliseconds / 1000
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return _finite_non_negative(float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def _finite_non_negative(value: float) -> float | None:
    return value if math.isfinite(value) and value >= 0 else None
