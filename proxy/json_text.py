"""JSON text as RFC 8259 defines it, read and written strictly.

Python's `json` accepts `NaN` and `Infinity`, lone UTF-16 surrogates (escaped, or even UTF-8-encoded, since
it decodes bytes with `surrogatepass`) and recursion errors; each of these later breaks a strict parser
downstream or an `encode()` in the middle of a response. The proxy reads what it parses through `loads` and
writes what it renders through `dumps`, so it never forwards or emits what a strict parser rejects.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads(raw: bytes | str) -> Any:
    """The value of a JSON text.

    Raises:
        ValueError: invalid UTF-8, not JSON, `NaN`/`Infinity`, a lone surrogate, or nested too deep.
    """
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
    # Escaped surrogates are legal in pairs; only when some appear is the (costlier) whole-value check paid.
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("JSON holds a lone UTF-16 surrogate") from None
        except RecursionError:
            raise ValueError("JSON nested too deep") from None
    return value


def dumps(value: Any, *, compact: bool = False) -> str:
    """JSON text of `value` (UTF-8 characters kept, never `NaN`).

    Raises:
        ValueError: `value` holds a non-finite float.
    """
    return (_COMPACT if compact else _SPACED).encode(value)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Built once: json.loads and json.dumps build a new decoder or encoder on every call that passes an option.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_SPACED = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
