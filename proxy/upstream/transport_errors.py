"""The one place where httpx's transport failures become the proxy's upstream errors.

Modelled on httpx's own `map_httpcore_exceptions`: a context manager around any upstream I/O, where the most
specific matching class wins, so a `ConnectTimeout` is "unreachable" although it is also a timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import httpx

from contextlift.proxy.errors import (
    UpstreamAnswerCutOff,
    UpstreamConnectionLost,
    UpstreamError,
    UpstreamPoolExhausted,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from contextlift.proxy.upstream.answers import MAX_HEAD_LINE_BYTES, MAX_RESPONSE_HEADERS, MalformedAnswer


def _pool_exhausted(error: httpx.HTTPError, what: str, answered: bool) -> UpstreamError:
    return UpstreamPoolExhausted(
        "no upstream connection came free in time (upstream_max_connections); retry shortly",
        headers={"retry-after": "1"},
    )


def _unreachable(error: httpx.HTTPError, what: str, answered: bool) -> UpstreamError:
    return UpstreamUnreachable(f"upstream unreachable: cannot connect ({type(error).__name__})")


def _timed_out(error: httpx.HTTPError, what: str, answered: bool) -> UpstreamError:
    return UpstreamTimeout(f"upstream timed out {what}")


def _connection_lost(error: httpx.HTTPError, what: str, answered: bool) -> UpstreamError:
    lost = UpstreamAnswerCutOff if answered else UpstreamConnectionLost
    return lost(f"upstream connection failed {what} ({type(error).__name__})")


def _malformed(error: httpx.HTTPError, what: str, answered: bool) -> UpstreamError:
    # The parser's own words are not relayed: they may quote the upstream's header lines.
    return UpstreamProtocolError(
        f"upstream answered with a head that is not valid HTTP (a protocol switch, more than "
        f"{MAX_RESPONSE_HEADERS} headers, a line over {MAX_HEAD_LINE_BYTES // 1024} KiB, or malformed)"
    )


_MAPPING: dict[type[httpx.HTTPError], Callable[[httpx.HTTPError, str, bool], UpstreamError]] = {
    httpx.PoolTimeout: _pool_exhausted,
    httpx.ConnectTimeout: _unreachable,
    httpx.ConnectError: _unreachable,
    httpx.TimeoutException: _timed_out,
    MalformedAnswer: _malformed,
    httpx.HTTPError: _connection_lost,
}


def upstream_error(error: httpx.HTTPError, what: str, *, answered: bool = False) -> UpstreamError:
    """The proxy error for an httpx failure `what` ("before answering", "in the middle of the stream"): no pooled
    connection free, unreachable, timed out, malformed, or broken off (`answered`: after the answer began)."""
    matches = [cls for cls in _MAPPING if isinstance(error, cls)]
    # The most specific class: the one no other match derives from (PoolTimeout before TimeoutException).
    best = next(cls for cls in matches if not any(other is not cls and issubclass(other, cls) for other in matches))
    return _MAPPING[best](error, what, answered)


@contextlib.contextmanager
def mapped_transport_errors(what: str, *, answered: bool = False) -> Iterator[None]:
    """Raise the proxy's `UpstreamError` in place of any httpx failure inside the block; `answered`: the block
    reads an answer the upstream has begun (a connection lost there is `UpstreamAnswerCutOff`)."""
    try:
        yield
    except httpx.HTTPError as error:
        raise upstream_error(error, what, answered=answered) from None
