"""One rule for `X-Context-Strategy`, answered or failed: it names the steps that ran on the request. A request
without documents whose upstream cannot be reached says `none` for a step that needs documents, as its success
would; one with documents names the step, which ran before the call failed, with what it noted."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream
from tests.serving import chat

TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars."]


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: Where do gamma rays come from?\nAnswer:"


def unreachable() -> httpx.ConnectError:
    return httpx.ConnectError("connection refused by fake")


@pytest.mark.parametrize(
    ("selection", "prompt", "named"),
    [
        ("reorder", "Tell me a joke.", "none"),
        ("reorder, medoid; k=2", "Tell me a joke.", "none"),
        ("repeat", "Tell me a joke.", "repeat"),
        ("reorder", litm(), "reorder"),
        ("filter; top=2, repeat", litm(), "filter; top=2, repeat"),
    ],
)
def test_a_failed_request_names_what_its_success_would_have(
    make_client: Any, fake: FakeUpstream, selection: str, prompt: str, named: str
) -> None:
    client = make_client(max_retries=0)
    fake.queue(unreachable())
    failed = client.post("/v1/chat/completions", json=chat(prompt), headers={"x-context-strategy": selection})
    assert failed.status_code == 502
    names = [step.split(";")[0] for step in named.split(", ")]
    assert [step.split(";")[0] for step in failed.headers["x-context-strategy"].split(", ")] == names
    answered = client.post("/v1/chat/completions", json=chat(prompt), headers={"x-context-strategy": selection})
    assert answered.status_code == 200
    # The steps as they ran, with what they noted (`repeated=user-turn; tokens=+6`): the same either way.
    assert failed.headers["x-context-strategy"] == answered.headers["x-context-strategy"]
