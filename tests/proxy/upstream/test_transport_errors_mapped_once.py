"""httpx's transport failures become the proxy's upstream errors in one place, the most specific class winning:
a connect timeout is "unreachable" (the upstream never answered at all), not a timeout of its answer."""

from __future__ import annotations

import httpx
import pytest

from contextlift.proxy.errors import (
    UpstreamConnectionLost,
    UpstreamError,
    UpstreamPoolExhausted,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from contextlift.proxy.upstream.transport_errors import mapped_transport_errors


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (httpx.PoolTimeout("pool"), UpstreamPoolExhausted),
        (httpx.ConnectTimeout("connect"), UpstreamUnreachable),
        (httpx.ConnectError("refused"), UpstreamUnreachable),
        (httpx.ReadTimeout("read"), UpstreamTimeout),
        (httpx.WriteTimeout("write"), UpstreamTimeout),
        (httpx.RemoteProtocolError("peer closed"), UpstreamConnectionLost),
        (httpx.ReadError("reset"), UpstreamConnectionLost),
        (httpx.DecodingError("bad gzip"), UpstreamConnectionLost),
    ],
)
def test_most_specific_mapping_wins(raised: httpx.HTTPError, expected: type[UpstreamError]) -> None:
    with pytest.raises(UpstreamError) as caught, mapped_transport_errors("while answering"):
        raise raised
    assert type(caught.value) is expected
    assert caught.value.__cause__ is None


def test_the_phase_is_named_in_the_message() -> None:
    with (
        pytest.raises(UpstreamTimeout, match="in the middle of the stream"),
        mapped_transport_errors("in the middle of the stream"),
    ):
        raise httpx.ReadTimeout("read")


def test_pool_exhaustion_asks_the_client_to_retry_shortly() -> None:
    with pytest.raises(UpstreamPoolExhausted) as caught, mapped_transport_errors("before answering"):
        raise httpx.PoolTimeout("pool")
    assert caught.value.headers == {"retry-after": "1"}
