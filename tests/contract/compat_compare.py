"""What the compatibility suite compares between a call made straight to the upstream and the same call made
through the proxy, and how a difference is shown.

For each call:

- what the upstream received: every request's method, path, query (as pairs, in order), headers and body (parsed
  JSON, or text). Headers each hop sets for itself are left out: `host` (each hop names its own), `content-length`
  (bodies are compared parsed), `accept-encoding` (the proxy's upstream client asks for the encodings it reads)
  and the hop-by-hop ones (`connection`, `keep-alive`, ...). The proxy's control headers (`x-context-*`, such as
  `X-Context-Strategy`) are its own and never forwarded, so they are left out on both sides.
- what the application got: the value the call returned, as plain data, or the exception it raised (its class,
  message, `status_code`, `body`, `request_id` and similar attributes, and the headers of the response it
  carries). Response headers are compared except those the server of each hop writes (`date`, `server`, framing
  and encoding) and those the proxy adds by design: `x-context-*` and `x-contextlift-*` always; `x-request-id`,
  `cache-control` and `x-accel-buffering` only where the upstream sent none (where it sent one, it must arrive
  unchanged). Likewise a client's request id attribute (`_request_id`, `request_id`) may hold the proxy's own id
  only where the upstream sent none.

Each hop's address (`127.0.0.1:<port>`) is written `<origin>` wherever it appears, since a client may echo its
base URL (litellm's `api_base`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)
REQUEST_HEADERS_EACH_HOP_SETS = HOP_HEADERS | {"host", "content-length", "accept-encoding"}
RESPONSE_HEADERS_EACH_HOP_SETS = HOP_HEADERS | {"date", "server", "content-length", "content-encoding"}
CONTROL_PREFIX = "x-context-"
"""Request headers that tell the proxy what to do; it consumes them."""
ADDED_BY_THE_PROXY_PREFIXES = (CONTROL_PREFIX, "x-contextlift-")
ADDED_BY_THE_PROXY_WHERE_UPSTREAM_SENT_NONE = frozenset({"x-request-id", "cache-control", "x-accel-buffering"})
REQUEST_ID_ATTRIBUTES = frozenset({"_request_id", "request_id"})
"""Where clients expose the response's `x-request-id` (openai's `completion._request_id`, `APIError.request_id`)."""
LONG_TEXT = 2_000
"""Strings longer than this are shown by length and digest in a diff (a base64 image would drown it)."""


def plain(value: Any) -> Any:
    """`value` as JSON-like data: pydantic models dumped (with an openai object's `_request_id`), httpx
    headers filtered as described in the module docstring, exceptions as by `raised`."""
    if isinstance(value, BaseException):
        return raised(value)
    if hasattr(value, "model_dump") and callable(value.model_dump):
        # warnings=False: a generic model (openai's `ParsedChatCompletion[City]`) warns that its `parsed` is
        # not the declared type, yet dumps it right.
        dumped = plain(value.model_dump(mode="json", warnings=False))
        request_id = getattr(value, "_request_id", None)
        return {**dumped, "_request_id": request_id} if request_id is not None else dumped
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


def raised(error: BaseException) -> dict[str, Any]:
    """An exception as the application sees it: type, message, the attributes clients put on API errors, and
    the headers of the HTTP response it carries."""
    seen: dict[str, Any] = {"class": f"{type(error).__module__}.{type(error).__qualname__}", "message": str(error)}
    for name in ("status_code", "code", "type", "param", "body", "request_id", "llm_provider", "model"):
        value = getattr(error, name, None)
        if value is not None and not callable(value):
            seen[name] = plain(value)
    for source, name in (("response headers", "response"), ("litellm response headers", "litellm_response_headers")):
        value = getattr(error, name, None)
        headers = getattr(value, "headers", value)
        if headers is not None and hasattr(headers, "multi_items"):
            seen[source] = response_headers(headers.multi_items())
    if error.__cause__ is not None:
        seen["cause"] = f"{type(error.__cause__).__qualname__}: {error.__cause__}"
    return seen


def response_headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Response headers as compared: those each hop's server writes and the proxy's own families left out,
    repeated ones joined. The proxy's additions where the upstream sent none are left out later, by
    `drop_added_by_the_proxy`, which sees both sides."""
    kept: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        if key in RESPONSE_HEADERS_EACH_HOP_SETS or key.startswith(ADDED_BY_THE_PROXY_PREFIXES):
            continue
        kept[key] = f"{kept[key]}, {value}" if key in kept else value
    return kept


def drop_added_by_the_proxy(direct: dict[str, Any], proxied: dict[str, Any]) -> None:
    """Removes, in place, from every header mapping of `proxied`, the headers the proxy adds where the
    upstream sent none (the matching mapping of `direct` lacks them)."""
    for key, value in list(proxied.items()):
        other = direct.get(key)
        if key in REQUEST_ID_ATTRIBUTES and other is None:
            # The proxy's own id, exposed as the client's request id: see the module docstring.
            if key in direct:
                proxied[key] = None
            else:
                del proxied[key]
        elif key.endswith("response headers") and isinstance(value, dict) and isinstance(other, dict):
            for name in ADDED_BY_THE_PROXY_WHERE_UPSTREAM_SENT_NONE - other.keys():
                value.pop(name, None)
        elif isinstance(value, dict) and isinstance(other, dict):
            drop_added_by_the_proxy(other, value)
        elif isinstance(value, list) and isinstance(other, list):
            for mine, theirs in zip(value, other, strict=False):
                if isinstance(mine, dict) and isinstance(theirs, dict):
                    drop_added_by_the_proxy(theirs, mine)


def without_origin(value: Any, origin: str) -> Any:
    host = origin.removeprefix("http://")
    if isinstance(value, str):
        return value.replace(origin, "<origin>").replace(host, "<origin>")
    if isinstance(value, dict):
        return {k: without_origin(v, origin) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_origin(v, origin) for v in value]
    return value


def shown(value: Any) -> Any:
    """Long strings replaced by their length and digest, so equality is kept and a diff stays readable."""
    if isinstance(value, str) and len(value) > LONG_TEXT:
        return f"<{len(value)} characters, sha256 {hashlib.sha256(value.encode()).hexdigest()[:16]}>"
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown(v) for v in value]
    return value


def diff(direct: dict[str, Any], proxied: dict[str, Any]) -> str:
    drop_added_by_the_proxy(direct, proxied)
    if direct == proxied:
        return ""
    a = json.dumps(direct, indent=1, sort_keys=True, default=repr).splitlines()
    b = json.dumps(proxied, indent=1, sort_keys=True, default=repr).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "straight to the upstream", "through the proxy", n=4, lineterm=""))


def differences(direct: Any, proxied: Any, path: str = "") -> list[str]:
    """Where two observations differ, as dotted paths (`application got.returned._request_id`)."""
    if isinstance(direct, dict) and isinstance(proxied, dict):
        keys = sorted(direct.keys() | proxied.keys())
        return [d for k in keys for d in differences(direct.get(k), proxied.get(k), f"{path}.{k}".lstrip("."))]
    if isinstance(direct, list) and isinstance(proxied, list) and len(direct) == len(proxied):
        return [
            d for i, (a, b) in enumerate(zip(direct, proxied, strict=True)) for d in differences(a, b, f"{path}.{i}")
        ]
    return [] if direct == proxied else [path]
