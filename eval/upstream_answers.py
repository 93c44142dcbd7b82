"""Reading what an upstream answers about itself (its model list, llama.cpp's `/props`, vLLM's `/version`) within
bounds, whatever it sends: the bytes read inflated a piece at a time and given up past `LARGEST_ANSWER` (a gzip bomb
costs what its first megabyte does), every answer within one deadline in all (httpx's timeouts bound each read, and a
trickle of one byte a read passes them), and JSON nested past what Python decodes refused rather than raised."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

import anyio
import httpx

LARGEST_ANSWER = 1 << 20
"""Bytes read of an answer, inflated: a model list or /props is a few kilobytes."""
_INFLATED_STEP = 64 * 1024
"""Bytes one inflating step may give: what a layer of compression holds at once, however much its input inflates to."""
_WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
ACCEPTED_ENCODINGS = "gzip, deflate"
"""What the requests accept: the encodings inflated here, a piece at a time (httpx's own decoders inflate a whole
piece at once)."""


class UnreadAnswer(Exception):
    """An answer not read, and why (in words for the run's output)."""

    def __init__(self, reason: str, *, answered: bool) -> None:
        super().__init__(reason)
        self.answered = answered
        """Whether the upstream answered (a success status) with what could not be read; False where it could not
        be reached or answered an error status, which a server without the path does."""


async def read_json_object(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], deadline: float
) -> dict[str, Any]:
    """The JSON object at `url`, read by `deadline` (`anyio.current_time()`'s clock).

    Raises:
        UnreadAnswer: no connection, an error status, past the deadline, over LARGEST_ANSWER inflated, an encoding
            other than gzip or deflate, or not a JSON object (nested too deep included).
    """
    try:
        with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
            async with client.stream("GET", url, headers={**headers, "accept-encoding": ACCEPTED_ENCODINGS}) as got:
                if got.status_code >= 300:
                    raise UnreadAnswer(f"answered {got.status_code}", answered=False)
                body = await _inflated_body(got)
    except TimeoutError:
        raise UnreadAnswer("no whole answer within the deadline", answered=True) from None
    except httpx.HTTPError as error:
        raise UnreadAnswer(f"not reached ({type(error).__name__})", answered=False) from None
    try:
        value = json.loads(body)
    except RecursionError:
        raise UnreadAnswer("JSON nested too deep", answered=True) from None
    except ValueError:
        raise UnreadAnswer("not JSON", answered=True) from None
    if not isinstance(value, dict):
        raise UnreadAnswer("not a JSON object", answered=True)
    return value


async def _inflated_body(response: httpx.Response) -> bytes:
    encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()]
    layers = [e for e in encodings if e != "identity"]
    # One layer at most, as the proxy's own reader takes (proxy/upstream/bodies.py): a server compresses once, and
    # layers stacked one over the other (`gzip, gzip`) are how a few hundred bytes inflate to gigabytes.
    if len(layers) > 1 or any(e not in _WINDOW_BITS for e in layers):
        raise UnreadAnswer(f"content-encoding {', '.join(encodings)!r}, not read", answered=True)
    inflater = zlib.decompressobj(_WINDOW_BITS[layers[0]]) if layers else None
    body = bytearray()
    async for raw in response.aiter_raw():
        try:
            for piece in _inflating(raw, inflater):
                body += piece
                if len(body) > LARGEST_ANSWER:
                    raise UnreadAnswer(f"over {LARGEST_ANSWER >> 20} MiB", answered=True)
        except zlib.error:
            raise UnreadAnswer("not valid compressed data", answered=True) from None
    return bytes(body)


def _inflating(raw: bytes, inflater: Any) -> Iterator[bytes]:
    """What `raw` inflates to, at most _INFLATED_STEP bytes at a time, as the consumer asks for them."""
    if inflater is None:
        yield raw
        return
    data = raw
    while True:
        out = inflater.decompress(data, _INFLATED_STEP)
        if out:
            yield out
        data = inflater.unconsumed_tail
        if not data and len(out) < _INFLATED_STEP:
            break
