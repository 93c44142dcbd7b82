"""End to end: the openai SDK, the proxy, and the real embedded SmolLM2 model behind it."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

pytestmark = pytest.mark.e2e

QUESTION: Any = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
LITM_PROMPT = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).\n\n"
    "Document [1](Title: Zorvath) The capital of the kingdom of Zorvath is Quellmoor.\n"
    "Document [2](Title: Brindle) Brindle is a small river town known for its ferries.\n"
    "Document [3](Title: Ostmark) Ostmark exports copper and wool.\n\n"
    "Question: what is the capital of Zorvath?\nAnswer:"
)


def test_readiness_and_models(proxy_url: str, sdk: openai.OpenAI) -> None:
    assert httpx.get(f"{proxy_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{proxy_url}/readyz").json()["status"] == "ready"
    assert [m.id for m in sdk.models.list()] == ["smollm2-135m-instruct"]


def test_chat_completion(sdk: openai.OpenAI) -> None:
    raw = sdk.chat.completions.with_raw_response.create(model="smollm2", messages=QUESTION, max_tokens=16)
    result = raw.parse()
    assert result.choices[0].message.content
    assert result.usage is not None
    assert result.usage.prompt_tokens > 0
    assert raw.headers["x-context-upstream-calls"] == "1"
    assert raw.headers["x-context-strategy"] == "none"


def test_stream_with_usage(sdk: openai.OpenAI) -> None:
    stream = sdk.chat.completions.create(
        model="smollm2", messages=QUESTION, max_tokens=16, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > chunks[-1].usage.completion_tokens > 0


def test_documents_are_detected_in_a_real_request(sdk: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": LITM_PROMPT}]
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2", messages=messages, max_tokens=16, extra_headers={"X-Context-Strategy": "reorder"}
    )
    assert raw.headers["x-context-documents"] == "3"
    assert raw.parse().choices[0].message.content is not None


def test_bad_input_gets_the_envelope_not_the_model(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="smollm2", messages=[])
    assert caught.value.code == "invalid_messages"


def test_legacy_completions_pass_through_to_llama_cpp(proxy_url: str) -> None:
    response = httpx.post(f"{proxy_url}/v1/completions", json={"prompt": "Hello", "max_tokens": 2}, timeout=60)
    assert response.status_code == 200
    assert response.json()["object"] == "text_completion"


def test_container_healthcheck_command(proxy_url: str) -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "contextlift.proxy.cli", "healthcheck", "--url"]
    assert subprocess.run([*command, f"{proxy_url}/healthz"], check=False).returncode == 0
    assert subprocess.run([*command, "http://127.0.0.1:9/healthz"], check=False, capture_output=True).returncode == 1
