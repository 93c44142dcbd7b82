"""On the real SmolLM2 server: an answer that is not streamed stops once its client has hung up, so the next request
is not kept waiting behind it (the model once computed every abandoned answer to its end)."""

from __future__ import annotations

import time

import httpx
import pytest

from contextlift.proxy.local_model import LocalModel

pytestmark = pytest.mark.e2e

_NO_END = {"0": -100, "2": -100}
"""SmolLM2's end-of-text and end-of-turn tokens, forbidden: the answer runs to `max_tokens`."""


def _story(max_tokens: int) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}],
            "max_tokens": max_tokens, "temperature": 0, "logit_bias": _NO_END}  # fmt: skip


def test_the_next_request_does_not_wait_for_an_answer_whose_client_left() -> None:
    with LocalModel(quiet=True) as model, httpx.Client(base_url=model.base_url, timeout=300) as client:
        started = time.monotonic()
        assert client.post("/chat/completions", json=_story(100)).status_code == 200
        per_token = (time.monotonic() - started) / 100
        with httpx.Client(base_url=model.base_url, timeout=1.0) as leaving, pytest.raises(httpx.ReadTimeout):
            leaving.post("/chat/completions", json=_story(1500))  # hangs up after 1 s
        started = time.monotonic()
        answer = client.post("/chat/completions", json=_story(1))
        waited = time.monotonic() - started
    assert answer.status_code == 200
    left_to_compute = 1500 * per_token - 1.0  # what the abandoned answer would still have held the model for
    assert waited < left_to_compute / 3, f"waited {waited:.1f} s; the abandoned answer had {left_to_compute:.1f} s left"
