"""Requests through httpx, read raw: the body as the proxy put it on the wire, however it ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import httpx

from hostile_replay.knobs import MiB
from hostile_replay.reply import READ_CAP, Reply


async def http_send(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    within: float = 20.0,
    cap: int = READ_CAP,
) -> Reply:
    """Send through httpx and read the body raw, at most `cap` bytes and `within` seconds; never raises for a
    body that breaks off (the reply says how it ended)."""
    started = time.monotonic()
    request = client.build_request(method, path, headers=headers, content=content)
    reply = Reply(None)
    try:
        async with asyncio.timeout(within):
            response = await client.send(request, stream=True)
            reply.status = response.status_code
            reply.headers = {k.lower(): v for k, v in response.headers.items()}
            reply.raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
            body = bytearray()
            try:
                async for piece in response.aiter_raw():
                    body += piece
                    if len(body) >= cap:
                        reply.cut = f"stopped reading at {cap // MiB} MiB"
                        break
            except httpx.HTTPError as error:
                reply.cut = type(error).__name__
            finally:
                reply.body = bytes(body)
                await response.aclose()
    except TimeoutError:
        reply.cut = f"still open after {within:g} s"
    except httpx.HTTPError as error:
        reply.cut = type(error).__name__
        reply.closed = True
    reply.seconds = time.monotonic() - started
    return reply
