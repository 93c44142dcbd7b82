"""The LiteLLM guardrail's hooks called as LiteLLM calls them, in this process: messages it cannot read go to the
provider as they came (never an exception into LiteLLM, which answers those with a 500), and a sampled call's case is
let go when the call fails or when cases hold more than the shadow queue's bytes. tests/contract/
test_litellm_guardrail.py runs the guardrail in a real LiteLLM proxy."""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any

import pytest

pytest.importorskip("litellm.integrations.custom_guardrail", reason="litellm (the test extra) is not installed")

from contextlift.proxy.litellm_guardrail import ContextLift
from tests.serving import MOUNTAINS

LITM = MOUNTAINS.removeprefix("Answer from the documents.\n\n")


def guardrail(monkeypatch: pytest.MonkeyPatch, **settings: str) -> ContextLift:
    for name in list(os.environ):
        if name.startswith("CONTEXTLIFT_"):
            monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(f"CONTEXTLIFT_{name.upper()}", value)
    return ContextLift(guardrail_name="contextlift", event_hook="pre_call", default_on=True, strategy="reorder")


def hook(guard: ContextLift, data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = asyncio.run(guard.async_pre_call_hook(None, None, data, "acompletion"))
    return result


@pytest.mark.parametrize(
    "messages",
    [["a string, not a message"], [{"role": "user", "content": ["a string part"]}], [], "not a list"],
    ids=["string-message", "string-part", "no-messages", "not-a-list"],
)
def test_messages_it_cannot_read_go_as_they_came(monkeypatch: pytest.MonkeyPatch, messages: Any) -> None:
    data = {"model": "m", "messages": copy.deepcopy(messages), "litellm_call_id": "c1"}
    out = hook(guardrail(monkeypatch), data)
    assert out["messages"] == messages
    assert out["metadata"]["contextlift"]["x-context-format"] == "none: unread (InvalidMessages)"


def test_a_readable_request_is_reordered(monkeypatch: pytest.MonkeyPatch) -> None:
    out = hook(guardrail(monkeypatch), {"model": "m", "messages": [{"role": "user", "content": LITM}]})
    assert out["messages"][0]["content"].startswith("Document [1](Title: Mont Blanc)")
    assert out["metadata"]["contextlift"]["x-context-order"] == "3,1,2"


def test_a_sampled_call_that_fails_lets_its_case_go(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = guardrail(monkeypatch, shadow_rate="1", upstream_url="http://127.0.0.1:9/v1", upstream_api_key="sk-x")

    async def run() -> tuple[int, int, int]:
        data = {"model": "m", "messages": [{"role": "user", "content": LITM}], "litellm_call_id": "c1"}
        await guard.async_pre_call_hook(None, None, data, "acompletion")
        held = len(guard._pending)
        await guard.async_post_call_failure_hook(data, RuntimeError("provider down"), None)
        return held, len(guard._pending), guard._pending_bytes

    assert asyncio.run(run()) == (1, 0, 0)


def test_cases_never_hold_more_than_the_shadow_queues_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = guardrail(monkeypatch, shadow_rate="1", upstream_url="http://127.0.0.1:9/v1", upstream_api_key="sk-x",
                      shadow_queue="2", shadow_max_body_bytes="4096")  # fmt: skip

    async def run() -> tuple[int, int]:
        for call in range(10):  # calls LiteLLM never completes
            data = {"model": "m", "messages": [{"role": "user", "content": LITM + " " * 3000}], "litellm_call_id": call}
            await guard.async_pre_call_hook(None, None, data, "acompletion")
        return len(guard._pending), guard._pending_bytes

    held, held_bytes = asyncio.run(run())
    assert held == 2
    assert held_bytes <= 2 * 4096
