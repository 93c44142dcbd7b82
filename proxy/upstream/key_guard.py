"""The key the proxy sends upstream never travels back to a client.

Upstreams echo rejected credentials (`invalid key sk-...`, `WWW-Authenticate: Bearer ...`), in error and
success bodies alike. Everything the proxy relays, on every route, streamed or not, passes through one
`KeyGuard` that blanks the key in header values and body bytes.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping

REDACTED = b"[redacted]"
_MIN_KEY = 8
"""Shorter values are not secrets worth the risk of blanking ordinary text that happens to match."""
CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",  # Azure OpenAI
        "x-api-key",  # Anthropic, many gateways
        "ocp-apim-subscription-key",  # Azure API Management
        "x-goog-api-key",  # Google
        "x-portkey-api-key",  # Portkey
        "cookie",
    }
)
"""The one list of the headers a client sends its credentials in (all but `cookie` are forwarded upstream)."""
_CREDENTIAL_NAME = re.compile(r"key|token|secret|auth|password|cookie", re.IGNORECASE)
"""Any other header whose name says it holds a credential (`x-my-gateway-token`) is taken as one."""


def credential_header(name: str) -> bool:
    """Whether a header of this name carries a credential: `CREDENTIAL_HEADERS`, or a name that says so."""
    return name.lower() in CREDENTIAL_HEADERS or _CREDENTIAL_NAME.search(name) is not None


def credential_guards(headers: Mapping[str, str]) -> list[KeyGuard]:
    """A guard per credential in `headers`: each credential header's whole value and, for a value with a scheme
    (`Bearer sk-...`, `Basic ...`), the part after it."""
    guards = []
    for name, value in headers.items():
        if credential_header(name):
            guards.append(KeyGuard(value))
            _, _, credential = value.strip().partition(" ")
            if credential.strip():
                guards.append(KeyGuard(credential))
    return guards


class KeyGuard:
    """Blanks one key wherever it appears."""

    def __init__(self, key: str | None) -> None:
        key = (key or "").strip()
        self._key = key.encode() if len(key) >= _MIN_KEY else None

    @classmethod
    def for_headers(cls, forwarded: Mapping[str, str], key_header: str = "authorization") -> KeyGuard:
        """The guard of the key in a set of headers about to go upstream: the bearer token of
        `Authorization`, or the whole value of another key header (`api-key` for Azure-style upstreams)."""
        value = next((v for k, v in forwarded.items() if k.lower() == key_header), "")
        if key_header == "authorization":
            scheme, _, value = value.partition(" ")
            value = value if scheme.lower() == "bearer" else ""
        return cls(value)

    def blank(self, data: bytes) -> bytes:
        return data.replace(self._key, REDACTED) if self._key and self._key in data else data

    def blank_text(self, data: str) -> str:
        return self.blank(data.encode()).decode() if self._key and self._key.decode() in data else data

    def blank_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The key blanked in every value; a header whose name holds it is dropped (a name has no blank form)."""
        key = self._key.decode() if self._key else None
        return {
            name: self.blank_text(value)
            for name, value in headers.items()
            if key is None or key.lower() not in name.lower()
        }

    async def blank_stream(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`chunks` with the key blanked, including a key split across two chunks: the last `len(key) - 1`
        bytes are held back until the next chunk shows whether they start it."""
        if self._key is None:
            async for chunk in chunks:
                yield chunk
            return
        keep = len(self._key) - 1
        pending = b""
        async for chunk in chunks:
            pending = (pending + chunk).replace(self._key, REDACTED)
            if len(pending) > keep:
                yield pending[: len(pending) - keep]
                pending = pending[len(pending) - keep :]
        if pending:
            yield pending
