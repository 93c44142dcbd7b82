"""HTTP/1.1 by hand on a raw socket: clients normalise paths, framing and timing, and the attacker's exact
bytes and pauses are what the path and HTTP-layer cases are about."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from hostile_replay.reply import Reply


def request_head(method: str, target: str, host: str, fields: Sequence[tuple[str, str]]) -> bytes:
    """A request line, `Host`, then `fields` in the order given (repeats and contradictions included)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", *(f"{name}: {value}" for name, value in fields)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    tls = ssl.create_default_context() if parts.scheme == "https" else None
    port = parts.port or (443 if tls else 80)
    return await asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)


async def exchange(
    url: str, writes: Sequence[bytes], *, gap: float = 0.0, wait: float = 5.0, until_close: bool = False
) -> Reply:
    """Write `writes` (`gap` seconds apart) on a new connection while reading what comes back, until the
    first response is complete (or, with `until_close`, the server closes) or `wait` seconds pass."""
    started = time.monotonic()
    reader, writer = await connect(url)

    async def feed() -> None:
        with contextlib.suppress(OSError):
            for index, data in enumerate(writes):
                if index and gap:
                    await asyncio.sleep(gap)
                writer.write(data)
                await writer.drain()

    feeding = asyncio.create_task(feed())
    received = bytearray()
    closed, answered_at = False, None
    try:
        while (remaining := started + wait - time.monotonic()) > 0:
            try:
                async with asyncio.timeout(remaining):
                    piece = await reader.read(65536)
            except TimeoutError:
                break
            except OSError:
                closed = True
                break
            if not piece:
                closed = True
                break
            received += piece
            replies = parse_responses(bytes(received), closed=False)
            if answered_at is None and replies and replies[0].cut is None:
                answered_at = time.monotonic() - started
                if not until_close:
                    break
    finally:
        feeding.cancel()
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    ended = time.monotonic() - started
    replies = parse_responses(bytes(received), closed=closed)
    reply = replies[0] if replies else Reply(None)
    reply.closed, reply.ended, reply.more = closed, ended, max(0, len(replies) - 1)
    reply.seconds = answered_at if answered_at is not None else ended
    return reply


def parse_responses(data: bytes, closed: bool) -> list[Reply]:
    """The HTTP/1.1 responses in what a raw connection received (the last one possibly incomplete)."""
    replies = []
    while data:
        head_end = data.find(b"\r\n\r\n")
        if head_end < 0:
            break
        lines = data[:head_end].decode("latin-1").split("\r\n")
        status_parts = lines[0].split(" ", 2)
        status = int(status_parts[1]) if len(status_parts) > 1 and status_parts[1].isdigit() else 0
        raw_headers = [tuple(p.strip() for p in line.split(":", 1)) for line in lines[1:] if ":" in line]
        headers = {name.lower(): value for name, value in raw_headers}
        rest = data[head_end + 4 :]
        complete = True
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body, rest, complete = _dechunk(rest)
        elif headers.get("content-length", "").isdigit():
            length = int(headers["content-length"])
            body, rest, complete = rest[:length], rest[length:], len(rest) >= length
        else:
            body, rest, complete = rest, b"", closed
        replies.append(Reply(status, headers, [(n, v) for n, v in raw_headers], body))
        if not complete:
            replies[-1].cut = "incomplete"
            break
        data = rest
    return replies


def _dechunk(data: bytes) -> tuple[bytes, bytes, bool]:
    body = bytearray()
    while True:
        line_end = data.find(b"\r\n")
        if line_end < 0:
            return bytes(body), b"", False
        size = int(data[:line_end].split(b";")[0] or b"0", 16)
        if size == 0:
            trailer_end = data.find(b"\r\n\r\n", line_end)
            return bytes(body), data[trailer_end + 4 :] if trailer_end >= 0 else b"", trailer_end >= 0
        start = line_end + 2
        if len(data) < start + size + 2:
            return bytes(body + data[start:]), b"", False
        body += data[start : start + size]
        data = data[start + size + 2 :]
