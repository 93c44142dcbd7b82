"""The embedded model's server stops computing an answer that is not streamed once its client has hung up: between
two batches of the prompt or two generated tokens (`stop_when_the_client_leaves`), told by a watcher on the request
(`WatchTheClient`). A streamed answer is left to the server, which checks at every chunk."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from contextlift.proxy import local_model_server
from contextlift.proxy.local_model_server import ClientLeft, WatchTheClient, stop_when_the_client_leaves


class FakeLlama:
    """What `stop_when_the_client_leaves` wraps of llama-cpp-python's `Llama`: `eval` and its batch size."""

    n_batch = 512

    def __init__(self) -> None:
        self.evaluated: list[int] = []

    def eval(self, tokens: Any) -> None:
        self.evaluated.append(len(tokens))


@pytest.fixture
def llama() -> type[FakeLlama]:
    class Wrapped(FakeLlama):
        pass

    stop_when_the_client_leaves(Wrapped)
    return Wrapped


def test_a_prompt_is_evaluated_in_the_batches_eval_would_cut(llama: type[FakeLlama]) -> None:
    model = llama()
    token = local_model_server._LEFT.set(threading.Event())
    try:
        model.eval(list(range(1200)))
    finally:
        local_model_server._LEFT.reset(token)
    assert model.evaluated == [512, 512, 176]


def test_without_a_watched_request_eval_is_called_once(llama: type[FakeLlama]) -> None:
    model = llama()
    model.eval(list(range(1200)))
    assert model.evaluated == [1200]


def test_once_the_client_has_left_no_further_batch_or_token_is_evaluated(llama: type[FakeLlama]) -> None:
    model = llama()
    left = threading.Event()
    token = local_model_server._LEFT.set(left)
    try:
        model.eval(list(range(600)))
        left.set()
        with pytest.raises(ClientLeft):
            model.eval(list(range(1200)))  # the next prompt batch
        with pytest.raises(ClientLeft):
            model.eval([7])  # the next generated token
    finally:
        local_model_server._LEFT.reset(token)
    assert model.evaluated == [512, 88]


async def _serve(body: dict[str, Any], leaves_after: float) -> threading.Event | None:
    """The watcher around an app that waits for its client to leave, as the model's worker would; returns the event
    the app saw (None: the request was not watched)."""
    seen: list[threading.Event | None] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["body"] == json.dumps(body).encode()
        left = local_model_server._LEFT.get()
        seen.append(left)
        if left is not None:
            for _ in range(100):
                if left.is_set():
                    return
                await asyncio.sleep(0.01)

    messages = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(leaves_after)
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        pass

    await WatchTheClient(app)({"type": "http", "method": "POST"}, receive, send)
    return seen[0]


async def test_a_client_that_hangs_up_on_an_answer_not_streamed_sets_the_event() -> None:
    left = await _serve({"model": "m", "messages": []}, leaves_after=0.05)
    assert left is not None
    assert left.is_set()


async def test_a_streamed_answer_is_not_watched() -> None:
    assert await _serve({"model": "m", "messages": [], "stream": True}, leaves_after=0.05) is None
