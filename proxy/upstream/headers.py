"""Which headers cross the proxy: the client's on their way upstream, the upstream's on their way back."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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
# The one list of upstream response headers never relayed: hop-by-hop ones (RFC 9110 7.6.1, with the obsolete
# `proxy-connection`), what the proxy rewrites (length and encoding: bodies are relayed decoded), what its own
# server sets, and cookies (README, "Cookies"). Those the upstream's `Connection` names are dropped too.
NOT_RELAYED = HOP_BY_HOP | {
    "proxy-connection",
    "content-length",
    "content-encoding",
    "date",
    "server",
    "set-cookie",
    "set-cookie2",
}
CLIENT_RETRY_HEADER = "x-stainless-retry-count"
"""The openai SDKs (and litellm, instructor) number their own retries here; > 0 means the client retries."""
CONTROL_PREFIX = "x-context-"
RETRIES_HEADER = "X-Context-Retries"
"""A client's own bound on the proxy's retries of its request (0: none); never forwarded, as `x-context-*`."""
# Relayed from upstream responses to the client: what an OpenAI client reads (retries, rate limits, timing).


def forwarded_headers(
    inbound: Mapping[str, str], api_key: str | None, key_header: str = "authorization"
) -> httpx.Headers:
    """The client's headers as they go upstream, every line of them (a name sent twice goes twice, in its order):
    control and hop-by-hop headers removed, the operator's key (when there is one) in `key_header` in place of
    whatever credentials the client sent there. `inbound` may hold a name more than once (a multi-dict, whose
    `items()` yields every line); its values are the server's latin-1 reading of the client's bytes."""
    lines = list(inbound.items())
    connection_listed = _listed(value for name, value in lines if name.lower() == "connection")
    kept = [
        (name, value)
        for name, value in lines
        if name.lower() not in NEVER_FORWARDED
        and name.lower() not in connection_listed
        and not name.lower().startswith(CONTROL_PREFIX)
    ]
    if api_key is not None:
        replaced = {"authorization", key_header}
        kept = [(name, value) for name, value in kept if name.lower() not in replaced]
        kept.append((key_header, f"Bearer {api_key}" if key_header == "authorization" else api_key))
    return httpx.Headers([(name.encode("latin-1"), header_bytes(value)) for name, value in kept])


def relayed_headers(upstream: httpx.Headers, *, content_type: bool = False) -> dict[str, str]:
    """The upstream's response headers as the client gets them: all of them (its `x-request-id`, rate limits,
    `openai-*`, anything a provider adds) but NOT_RELAYED and those its `Connection` names, the content type (the
    proxy writes the body it sends, unless `content_type`: a relayed body goes as it came) and the `x-context-*`
    family, which is the proxy's own. Values are the
    upstream's bytes read as latin-1, so that the server writes back the same bytes (UTF-8 text in a value
    included); a name sent more than once is joined with commas (RFC 9110 5.3)."""
    connection_listed = _listed(upstream.get_list("connection"))
    relayed: dict[str, str] = {}
    for raw_name, raw_value in upstream.raw:
        name = raw_name.decode("latin-1").lower()
        if (
            name in NOT_RELAYED
            or name in connection_listed
            or (name == "content-type" and not content_type)
            or name.startswith(CONTROL_PREFIX)
        ):
            continue
        value = raw_value.decode("latin-1")
        relayed[name] = f"{relayed[name]}, {value}" if name in relayed else value
    return relayed


_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name (RFC 9110 5.6.2)."""
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
"""A byte no header value may hold (RFC 9110 5.5): controls but the tab."""


def unwritable_answer(status: int, headers: httpx.Headers) -> str | None:
    """What in an upstream's answer the proxy's server could not write to a client (a status outside 100-599, a
    header name that is not a token, a control byte in a value), or None. Relayed as it is, the client would get
    no answer at all, or a 500 that blames the proxy."""
    if not 100 <= status <= 599:
        return f"status {status}"
    for name, value in headers.raw:
        if _TOKEN.fullmatch(name) is None:
            return f"a header name that is not a token ({name[:40]!r})"
        if _CONTROL.search(value) is not None:
            return f"a control byte in the value of {name[:40].decode('latin-1')}"
    return None


def _listed(values: Iterable[str]) -> set[str]:
    """The header names a `Connection` header's values list (RFC 9110 7.6.1), lowercased."""
    return {token.strip().lower() for value in values for token in value.split(",") if token.strip()}


def header_bytes(value: str) -> bytes:
    """A value as it goes out: the server read the client's bytes as latin-1, so latin-1 gives them back; a value
    the proxy made itself with other characters goes as UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


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
