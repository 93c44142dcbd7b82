"""`repeat` writes the documents into the prompt's text: a step after it that needs documents would find none and
be passed over without a word. Such a pipeline is a 400 `invalid_strategy` saying why, before any upstream call;
`repeat` after those steps runs them all."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import FakeUpstream
from tests.serving import chat

TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars."]


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: Where do gamma rays come from?\nAnswer:"


def post(client: Any, selection: str) -> Any:
    return client.post("/v1/chat/completions", json=chat(litm()), headers={"x-context-strategy": selection})


@pytest.mark.parametrize(
    ("selection", "later"),
    [("repeat, reorder", "reorder"), ("repeat, filter; top=1", "filter"), ("repeat, focus", "focus"),
     ("reorder, repeat, query-aware", "query-aware"), ("repeat, medoid; k=2", "medoid"), ("repeat, recite", "recite")],
)  # fmt: skip
def test_a_step_that_needs_documents_after_repeat_is_refused(
    client: Any, fake: FakeUpstream, selection: str, later: str
) -> None:
    response = post(client, selection)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_strategy"
    said = f"'{later}' needs the documents, and 'repeat' before it writes them into the prompt's text"
    assert said in error["message"]
    assert fake.requests == []


@pytest.mark.parametrize("selection", ["reorder; ranker=lexical, repeat", "repeat, repeat; limit=100000"])
def test_repeat_after_the_steps_that_need_documents_runs_them_all(
    client: Any, fake: FakeUpstream, selection: str
) -> None:
    response = post(client, selection)
    assert response.status_code == 200
    ran = [step.split(";")[0] for step in response.headers["x-context-strategy"].split(", ")]
    assert ran == [step.split(";")[0].strip() for step in selection.split(",")]
