"""Every waiting request and stream watches the drain deadline through a future of its own: waking them all
stays one event, and joining or leaving costs the same at 1 or 1,000 in flight (a future shared by all of them
made every `asyncio.wait` scan its callbacks, one per waiter). A chat request's work runs in the request's own
task, which the deadline or the client's leaving cancels (`_unless_disconnected`)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from contextlift.proxy.errors import ShuttingDown
from contextlift.proxy.routes.chat import ClientDisconnected, _unless_disconnected
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


class _Request:
    """What the route's watcher reads of a request: a disconnect after `leaves_after` s, told by its ASGI
    receive."""

    def __init__(self, leaves_after: float | None, told_by: str) -> None:
        self.leaves_after = leaves_after
        self.scope: dict[str, Any] = {}

    async def receive(self) -> dict[str, Any]:
        if self.leaves_after is None:
            await asyncio.Event().wait()
        await asyncio.sleep(cast(float, self.leaves_after))
        return {"type": "http.disconnect"}


def exchange(proxy: ProxyState, leaves_after: float | None = None, told_by: str = "receive") -> Any:
    return SimpleNamespace(state=proxy, request=_Request(leaves_after, told_by))


TOLD_BY = pytest.mark.parametrize("told_by", ["receive"])


async def endless(ended: list[str]) -> str:
    try:
        await asyncio.Event().wait()
    finally:
        ended.append("work ended")
    return "never"


async def test_work_still_waiting_at_the_deadline_is_cancelled_and_answered_503() -> None:
    proxy, ended = state(), []
    proxy.begin_shutdown(grace=0.6)  # the deadline: 0.1 s from now
    with pytest.raises(ShuttingDown):
        await _unless_disconnected(exchange(proxy), endless(ended))
    assert ended == ["work ended"]
    await asyncio.sleep(0.01)  # the request's task goes on, not cancelled: it still writes its 503
    assert not proxy._drain_waiters


@TOLD_BY
async def test_work_whose_client_left_is_cancelled(told_by: str) -> None:
    proxy, ended = state(), []
    with pytest.raises(ClientDisconnected):
        await _unless_disconnected(exchange(proxy, leaves_after=0.02, told_by=told_by), endless(ended))
    assert ended == ["work ended"]
    await asyncio.sleep(0.01)


@TOLD_BY
async def test_finished_work_leaves_nothing_that_cancels_the_task_later(told_by: str) -> None:
    proxy = state()

    async def quick() -> str:
        await asyncio.sleep(0)
        return "answer"

    assert await _unless_disconnected(exchange(proxy, leaves_after=0.01, told_by=told_by), quick()) == "answer"
    proxy.begin_shutdown(grace=0.5)
    await asyncio.sleep(0.05)  # the client has left and the deadline passed: neither reaches this task now
    assert not proxy._drain_waiters


async def test_a_cancellation_from_outside_goes_on_up_as_a_cancellation() -> None:
    proxy, ended = state(), []
    task = asyncio.ensure_future(_unless_disconnected(exchange(proxy), endless(ended)))
    await asyncio.sleep(0.01)
    task.cancel()  # the server's own, at the end of the grace
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == ["work ended"]
