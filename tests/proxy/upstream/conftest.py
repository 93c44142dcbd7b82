"""The upstream transport's real-socket suites run on both event loops the proxy serves on: asyncio's, and
uvloop's (the server's choice where it is installed), whose transports differ (their classes, when
`connection_made` comes, how a reset is reported)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop

_ON_BOTH_LOOPS = frozenset({"test_upstream_transport.py"})


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    # Once a folder has this hook, pytest-asyncio asks it for every test there: the others get asyncio's alone.
    if item.path.name in _ON_BOTH_LOOPS:
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}
