"""Work in proportion to a client's body, kept off the event loop: CPU that a large body makes long runs in a
worker thread, so other requests (and `/healthz`) keep answering meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

LARGE_BODY = 1024 * 1024
"""Request bodies beyond this are parsed, and their upstream bodies serialised, in a worker thread: tens of
milliseconds of CPU each, off the event loop."""


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)` in a worker thread, so the event loop (and `/healthz`) keeps answering meanwhile."""
    return await anyio.to_thread.run_sync(function, *args)


async def reading(function: Callable[..., T], raw: bytes, *args: Any) -> T:
    """`function(raw, *args)`, a parse of a client's body: in a worker thread when the body is large."""
    return await off_loop(function, raw, *args) if len(raw) > LARGE_BODY else function(raw, *args)
