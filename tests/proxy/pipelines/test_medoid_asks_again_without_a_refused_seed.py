"""medoid names a sampling `seed` on each voting call, a field the client never sent. An upstream that refuses it (a
400 or 422 whose error names `seed`: OpenAI's `param`, a pydantic `loc`, or Azure's one sentence) gets the voting
calls again without it, and the client its answer (`seed=refused`); any other refusal reaches the client as it
came, asked once."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, completion
from tests.serving import chat

TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars."]
AZURE = {"error": {"message": "Unrecognized request argument supplied: seed", "type": "invalid_request_error",
                   "param": None, "code": None}}  # fmt: skip
OPENAI = {"error": {"message": "Unknown parameter: 'seed'.", "type": "invalid_request_error", "param": "seed",
                    "code": "unknown_parameter"}}  # fmt: skip
PYDANTIC = {"object": "error", "type": "invalid_request_message_error",
            "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "seed"], "input": 1}]}}  # fmt: skip
OTHER = {"error": {"message": "This model's maximum context length is 8192 tokens.", "type": "invalid_request_error",
                   "param": "messages", "code": "context_length_exceeded"}}  # fmt: skip


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: Where do gamma rays come from?\nAnswer:"


def refusing_seed(status: int, error: dict[str, Any]) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        if "seed" in json.loads(request.content):
            return httpx.Response(status, json=error)
        return httpx.Response(200, json=completion("Stars."))

    return answer


@pytest.mark.parametrize(("status", "error"), [(400, AZURE), (400, OPENAI), (422, PYDANTIC)], ids=["azure", "openai",
                         "pydantic"])  # fmt: skip
def test_voting_calls_are_asked_again_without_the_seed_the_upstream_refused(
    client: Any, fake: FakeUpstream, status: int, error: dict[str, Any]
) -> None:
    fake.queue(*[refusing_seed(status, error)] * 6)
    response = client.post("/v1/chat/completions", json=chat(litm()), headers={"x-context-strategy": "medoid; k=3"})
    assert response.status_code == 200, response.text
    assert "seed=refused" in response.headers["x-context-strategy"]
    assert response.json()["choices"][0]["message"]["content"] == "Stars."
    bodies = fake.bodies
    assert ["seed" in body for body in bodies] == [True] * 3 + [False] * 3
    assert response.headers["x-context-upstream-calls"] == "6"


def test_a_refusal_that_names_another_field_reaches_the_client_asked_once(client: Any, fake: FakeUpstream) -> None:
    fake.queue(*[httpx.Response(400, json=OTHER)] * 3)
    response = client.post("/v1/chat/completions", json=chat(litm()), headers={"x-context-strategy": "medoid; k=3"})
    assert response.status_code == 400
    assert response.json() == OTHER
    assert len(fake.requests) == 3
