"""What goes over the wire: strict JSON checks, OpenAI-shaped answers and stream frames, the gzip bomb."""

from __future__ import annotations

import functools
import json
import re
import zlib
from typing import Any

from hostile_replay.knobs import MiB

DOCS = "\n".join(f"Document [{i}](Title: Place {i}) Place {i} is known for export number {i}." for i in range(1, 9))
DOCS_PROMPT = f"Answer from the documents.\n\n{DOCS}\n\nQuestion: what is place 4 known for?\nAnswer:"

_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(raw: bytes | str) -> Any:
    """The JSON value, or ValueError where a strict parser (no NaN, no lone surrogates, UTF-8 only) would
    refuse it."""
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    value = json.loads(text, parse_constant=_refuse_constant)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and _SURROGATE.search(item):
            raise ValueError("lone surrogate in a string")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


def envelope_code(raw: bytes) -> str | None:
    """The `code` of an OpenAI error envelope (`""` when null), or None if `raw` is not one."""
    try:
        value = strict_json(raw)
    except ValueError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    if not isinstance(error, dict) or not {"message", "type", "param", "code"} <= error.keys():
        return None
    return str(error["code"] or "")


def server_error(message: str) -> bytes:
    """An upstream's OpenAI error envelope with a null code, as a 5xx carries it."""
    return f'{{"error": {{"message": "{message}", "type": "server_error", "param": null, "code": null}}}}'.encode()


def completion_json(content: Any = "Paris.", **extra: Any) -> bytes:
    body = {"id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": "hostile-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}, **extra}  # fmt: skip
    # Compact, with a final newline: unlike anything json.dumps writes by default, so a re-serialised answer
    # cannot pass for the upstream's own bytes.
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def chunk_json(content: str | None = None, *, finish: str | None = None, index: int = 0) -> str:
    delta = {"content": content} if content is not None else {}
    choice = {"index": index, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1,
                       "model": "hostile-model", "choices": [choice]})  # fmt: skip


def sse(*payloads: str, done: bool = True) -> bytes:
    frames = "".join(f"data: {p}\n\n" for p in payloads)
    return (frames + ("data: [DONE]\n\n" if done else "")).encode()


@functools.cache
def gzip_bomb() -> bytes:
    """128 MiB of zeros, gzip-encoded in about 128 KiB (issue 12, item 7, scaled down by four)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join(packer.compress(block) for _ in range(128)) + packer.flush()
