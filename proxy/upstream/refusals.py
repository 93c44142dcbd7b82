"""Which request fields an upstream's 400 or 422 refuses, read from its error body: what lets a strategy that added a
field the client never sent (medoid's `seed`) ask again without it.

The structured fields come first: OpenAI's envelope names the field in `error.param` (`unknown_parameter`), and a
server that validates with pydantic (FastAPI; Mistral's API) lists `detail[].loc` as `["body", FIELD]`. Azure OpenAI
and the gateways that copy it name the field only in the sentence `Unrecognized request argument supplied: FIELD`
(with `param` null): that exact sentence, anchored, is read as a last resort, because nothing structured says it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from contextlift.proxy import json_text

REFUSING_STATUSES = frozenset({400, 422})
_LARGEST_ERROR = 64 * 1024
"""Bytes of an error body read for its fields: an error is a few hundred; a larger body names no field."""
_UNRECOGNIZED = re.compile(r"Unrecognized request arguments? supplied: (?P<names>[A-Za-z0-9_, ]{1,200})")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def refused_fields(status: int, content: bytes) -> frozenset[str]:
    """The request fields a `status` answer with body `content` refuses by name; empty when it names none."""
    if status not in REFUSING_STATUSES or len(content) > _LARGEST_ERROR:
        return frozenset()
    try:
        body = json_text.loads(content)
    except ValueError:
        return frozenset()
    if not isinstance(body, Mapping):
        return frozenset()
    return frozenset(name for name in _named(body) if _FIELD.fullmatch(name))


def _named(body: Mapping[str, Any]) -> Iterator[str]:
    error = body.get("error")
    if isinstance(error, Mapping):
        if isinstance(error.get("param"), str):
            yield error["param"]
            return
        message = error.get("message")
        if isinstance(message, str) and (match := _UNRECOGNIZED.fullmatch(message.strip())):
            yield from (name.strip() for name in match["names"].split(","))
    for holder in (body, body.get("message"), error):
        details = holder.get("detail") if isinstance(holder, Mapping) else None
        for detail in details if isinstance(details, list) else ():
            location = detail.get("loc") if isinstance(detail, Mapping) else None
            if isinstance(location, list) and len(location) == 2 and location[0] == "body":
                yield str(location[1])
