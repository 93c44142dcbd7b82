"""The interface through which strategies call the upstream model; the proxy hands them an implementation.

Strategies never see HTTP: they send chat-completions bodies and get back parsed completions or a stream of
chunk payloads. Every failure of an upstream call is an `UpstreamFailure`, whatever its cause.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class UpstreamFailure(Exception):
    """An upstream call failed: refused, timed out, broke off, or answered with an error status."""

    @property
    def refused_fields(self) -> frozenset[str]:
        """The request fields the upstream refused by name (a 400 or 422 whose error says which): a step that added
        one of them may ask again without it. Empty where the failure names none."""
        return frozenset()


@dataclass(frozen=True, slots=True)
class Completion:
    """A non-streamed chat completion as the upstream returned it."""

    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    """Upstream response headers worth relaying to the client (rate limits, processing time)."""
    raw: bytes | None = None
    """The upstream's own bytes of `body` (with the key guard applied), where the upstream client read them: a
    completion no executor rebuilt is relayed as these bytes, not re-serialised. Never carried into another
    completion: one built from this one's body has none."""


class CompletionStream(Protocol):
    """An open streamed chat completion: its status was a success, its events are still to come."""

    @property
    def headers(self) -> Mapping[str, str]:
        """Upstream response headers worth relaying to the client."""
        ...

    def events(self) -> AsyncIterator[str]:
        """The `data:` payloads of the stream in order, without the final `[DONE]`.

        Raises:
            UpstreamFailure: the stream broke off, stalled past its deadline, or was malformed.
        """
        ...

    async def aclose(self) -> None:
        """Close the upstream connection; safe to call more than once."""
        ...


class Upstream(Protocol):
    """Calls the configured upstream for one client request."""

    async def complete(self, body: Mapping[str, Any]) -> Completion:
        """Send a non-streamed chat-completions request.

        Raises:
            UpstreamFailure: the call failed.
        """
        ...

    async def stream(self, body: Mapping[str, Any]) -> CompletionStream:
        """Send a streamed chat-completions request and return once the upstream accepted it.

        Raises:
            UpstreamFailure: the call failed before any event.
        """
        ...


StrategyOutcome = Completion | CompletionStream
"""What the client gets: a whole completion, or an open stream to relay."""


USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def add_usage(total: dict[str, int], usage: object) -> None:
    """Add a completion's `usage` (if it is one: an upstream may send anything) to `total`, count by count."""
    if not isinstance(usage, Mapping):
        return
    for key in USAGE_COUNTS:
        value = usage.get(key)
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value
