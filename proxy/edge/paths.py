"""One canonical path per request, computed once before routing, and the exact path forwarded upstream.

The path is percent-decoded once. Whatever could mean something else to a router, a file system or an
upstream that decodes again is refused rather than normalised: a normalisation that differs from the
upstream's is how traversal and route bypass happen, and no OpenAI-compatible endpoint needs any of it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import quote

from contextlift.proxy.errors import InvalidPath

_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
# Encoded, these would change the path's structure once decoded: separators, query, fragment, a second
# round of decoding, path parameters.
_REFUSED_ENCODED = frozenset(b"/\\?#%;")
# Characters left unescaped when the canonical path is written out again (RFC 3986 pchar, minus `;`).
_PATH_SAFE = "/:@!$&'()*+,=-._~"


def canonical_path(raw_path: bytes) -> str:
    """The request path decoded once, if it is a plain absolute path.

    Raises:
        InvalidPath: encoded separators, `%`, `?` or `#`; a raw `#`; dot segments; empty segments; backslashes;
            control characters; `;` path parameters; malformed escapes or UTF-8.
    """
    if not raw_path.startswith(b"/"):
        raise InvalidPath("the request path must be absolute")
    # A raw `#` begins a fragment, which a request target never carries (RFC 9112 3.2); h11 lets it through.
    if any(byte < 0x21 or byte >= 0x7F or byte in b"\\;#" for byte in raw_path):
        raise InvalidPath("the request path holds a control character, a space, a backslash, ';' or '#'")
    if raw_path.count(b"%") != len(_ESCAPE.findall(raw_path)):
        raise InvalidPath("the request path holds a malformed percent escape")
    for match in _ESCAPE.finditer(raw_path):
        byte = int(match.group(1), 16)
        if byte in _REFUSED_ENCODED or byte < 0x20 or byte == 0x7F:
            raise InvalidPath(f"the request path encodes {chr(byte)!r}, which is refused")
    decoded = _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw_path)
    try:
        path = decoded.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidPath("the request path is not UTF-8 once decoded") from None
    segments = path.split("/")[1:]
    for index, segment in enumerate(segments):
        if segment in (".", ".."):
            raise InvalidPath("the request path holds a '.' or '..' segment")
        if not segment and index != len(segments) - 1:
            raise InvalidPath("the request path holds an empty segment")
    return path


_CACHED_PATH_BYTES = 256
"""Longest raw path whose canonical form is kept: a route's path is a few dozen bytes, and the cache's memory stays
under 256 entries of this."""


def canonical_and_encoded(raw_path: bytes) -> tuple[str, bytes]:
    """`canonical_path` and its `encoded_path` as bytes, kept for the last 256 short paths: the same few paths
    come in every request, and the two (a byte-by-byte scan, a regex, `quote`) are worth doing once per path.

    Raises:
        InvalidPath: as `canonical_path` (a refused path is never kept).
    """
    if len(raw_path) <= _CACHED_PATH_BYTES:
        return _kept(raw_path)
    path = canonical_path(raw_path)
    return path, encoded_path(path).encode()


@lru_cache(maxsize=256)
def _kept(raw_path: bytes) -> tuple[str, bytes]:
    path = canonical_path(raw_path)
    return path, encoded_path(path).encode()


def encoded_path(path: str) -> str:
    """A canonical path written out for the upstream: what was decoded is escaped again, nothing else."""
    return quote(path, safe=_PATH_SAFE)
