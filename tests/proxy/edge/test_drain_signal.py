"""Every waiting request and stream watches the drain deadline through a future of its own: waking them all
stays one event, and joining or leaving costs the same at 1 or 1,000 in flight (a future shared by all of them
made every `asyncio.wait` scan its callbacks, one per waiter)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from contextlift.proxy.settings import Settings
from contextlift.proxy.state import ProxyState
from contextlift.strategies import build_registry


def state() -> ProxyState:
    # The drain signal touches neither the upstream nor the strategies: no client is built.
    return ProxyState(Settings(), build_registry(), upstream=cast(Any, None))


async def test_waiters_leave_no_callback_on_the_shared_future_and_all_wake_at_the_deadline() -> None:
    proxy = state()
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def wait_like_a_request() -> bool:
        with proxy.drain_signal() as drained:
            await asyncio.wait({never, drained}, return_when=asyncio.FIRST_COMPLETED)
            return drained.done()

    waiting = [asyncio.ensure_future(wait_like_a_request()) for _ in range(1000)]
    await asyncio.sleep(0)
    shared = proxy.drain_started()
    assert len(cast(Any, shared)._callbacks) == 1  # the one that wakes the waiters, however many there are
    assert len(proxy._drain_waiters) == 1000

    started = time.monotonic()
    proxy.begin_shutdown(grace=0.6)  # the deadline: 0.1 s from now
    assert await asyncio.gather(*waiting) == [True] * 1000
    assert time.monotonic() - started >= 0.09
    assert not proxy._drain_waiters  # each left the set on its way out
    never.cancel()


async def test_a_waiter_that_starts_after_the_deadline_is_done_at_once() -> None:
    proxy = state()
    proxy.begin_shutdown(grace=0.0)
    await asyncio.wait_for(proxy.drain_started(), timeout=2)
    with proxy.drain_signal() as drained:
        assert drained.done()
    assert not proxy._drain_waiters


async def test_a_waiter_that_leaves_before_the_deadline_is_not_woken_later() -> None:
    proxy = state()
    with proxy.drain_signal() as drained:
        pass
    proxy.begin_shutdown(grace=0.5)
    await asyncio.wait_for(proxy.drain_started(), timeout=2)
    await asyncio.sleep(0)
    assert not drained.done()
