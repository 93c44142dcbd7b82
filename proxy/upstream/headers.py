"""Which headers cross the proxy: the client's on their way upstream, the upstream's on their way back."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from contextlift.proxy.errors import InvalidRequest

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# The one list of client headers never sent upstream: hop-by-hop ones, what httpx sets itself, the proxy's
# own control headers (and the `x-context-` prefix below), headers by which a front server or framework could
# be told a different host or path, and cookies: the proxy's clients share one upstream identity, and
# cookies are per client (see the README, "Cookies").
NEVER_FORWARDED = HOP_BY_HOP | {
    "host",
    "content-length",
    "accept-encoding",
    "cookie",
    # The proxy holds the whole body before it calls: a client's 100-continue is for the hop to the proxy, and
    # forwarded it would make the upstream client wait for an interim answer the upstream need not send.
    "expect",
    "forwarded",
    "x-forwarded-host",
    "x-forwarded-prefix",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
}
# The one list of upstream response headers never relayed: hop-by-hop ones, what the proxy rewrites (length
# and encoding: bodies are relayed decoded), what its own server sets, and cookies (README, "Cookies").
NOT_RELAYED = HOP_BY_HOP | {"content-length", "content-encoding", "date", "server", "set-cookie"}
CLIENT_RETRY_HEADER = "x-stainless-retry-count"
"""The openai SDKs (and litellm, instructor) number their own retries here; > 0 means the client retries."""
CONTROL_PREFIX = "x-context-"
RETRIES_HEADER = "X-Context-Retries"
"""A client's own bound on the proxy's retries of its request (0: none); never forwarded, as `x-context-*`."""
# Relayed from upstream responses to the client: what an OpenAI client reads (retries, rate limits, timing).


def forwarded_headers(
    inbound: Mapping[str, str], api_key: str | None, key_header: str = "authorization"
) -> dict[str, str]:
    """The client's headers as they go upstream: control and hop-by-hop headers removed, the operator's key
    (when there is one) in `key_header` in place of whatever credentials the client sent there."""
    connection_listed = {h.strip().lower() for h in inbound.get("connection", "").split(",") if h.strip()}
    headers = {
        name: value
        for name, value in inbound.items()
        if name.lower() not in NEVER_FORWARDED
        and name.lower() not in connection_listed
        and not name.lower().startswith(CONTROL_PREFIX)
    }
    if api_key is not None:
        replaced = {"authorization", key_header}
        headers = {k: v for k, v in headers.items() if k.lower() not in replaced}
        headers[key_header] = f"Bearer {api_key}" if key_header == "authorization" else api_key
    return headers


def relayed_headers(upstream: httpx.Headers) -> dict[str, str]:
    """The upstream's response headers as the client gets them: all of them (its `x-request-id`, rate limits,
    `openai-*`, anything a provider adds) but NOT_RELAYED, the content type (the proxy writes the body it
    sends) and the `x-context-*` family, which is the proxy's own."""
    return {
        name: value
        for name, value in upstream.items()
        if name not in NOT_RELAYED and name != "content-type" and not name.startswith(CONTROL_PREFIX)
    }


def error_headers(upstream: httpx.Headers) -> dict[str, str]:
    headers = relayed_headers(upstream)
    for name in ("content-type", "location"):
        if name in upstream:
            headers[name] = upstream[name]
    return headers


def client_retries(headers: Mapping[str, str]) -> bool:
    """Whether this request is already a retry by the client's SDK, which will retry again on failure."""
    value = next((v for k, v in headers.items() if k.lower() == CLIENT_RETRY_HEADER), "0").strip()
    return value.isdigit() and int(value) > 0


def requested_retries(headers: Mapping[str, str]) -> int | None:
    """The most retries a client allows the proxy for this request (`X-Context-Retries`), None when unset. The
    operator's settings still bound it: a client can only ask for fewer. Sent more than once (or as a list, `1, 0`,
    which HTTP makes the same thing), the smallest value counts: each sender along the way asked for at most that
    many, and taking fewer retries than one of them asked for can only spend less. `headers` may hold a name
    more than once (a multi-dict, whose `items()` yields every value).

    Raises:
        InvalidRequest: a value is not a whole number.
    """
    values = [v for k, v in headers.items() if k.lower() == RETRIES_HEADER.lower()]
    if not values:
        return None
    asked = []
    for value in values:
        for part in value.split(","):
            text = part.strip()
            # Three digits are already more than any retry setting allows (max_retries is at most 10).
            if not (text.isascii() and text.isdigit() and len(text) <= 3):
                raise InvalidRequest(
                    f"{RETRIES_HEADER} must be a whole number of retries (0: none), got {value[:40]!r}",
                    param=RETRIES_HEADER,
                )
            asked.append(int(text))
    return min(asked)
