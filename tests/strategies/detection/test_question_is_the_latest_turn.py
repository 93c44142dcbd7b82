"""The question documents are ranked against: the latest user turn of a chat, a bare question after numbered
blocks (never absorbed into the last document), or a question written before the context."""

from __future__ import annotations

from typing import Any

from contextlift.strategies import parse_request

FENCED_SYSTEM = "Use the context below.\n------\nParis is in France.\n\nBerlin is in Germany.\n------"


def chat(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": role, "content": content} for role, content in turns]}


def test_a_later_user_turn_is_the_question_not_the_first_one() -> None:
    body = chat(
        ("system", FENCED_SYSTEM),
        ("user", "Where is Paris?"),
        ("assistant", "In France."),
        ("user", "And Berlin?"),
    )
    assert parse_request(body).question == "And Berlin?"


def test_documents_given_in_an_earlier_turn_are_ranked_against_the_latest_one() -> None:
    first = "Context:\nParis is in France.\n---\nBerlin is in Germany.\n\nQuestion: Where is Paris?"
    body = chat(("user", first), ("assistant", "In France."), ("user", "And Berlin?"))
    request = parse_request(body)
    assert request.block is not None
    assert request.block.message_index == 0
    assert request.question == "And Berlin?"


def test_a_bare_question_after_headed_documents_stays_out_of_the_last_one() -> None:
    # It used to become part of document 3, which `reorder` then moved into the middle, ranked against "".
    prompt = (
        "## Document 1\nParis is in France.\n\n## Document 2\nBerlin is in Germany.\n\n## Document 3\nRome.\n\n"
        "Where is Rome?"
    )
    request = parse_request(chat(("user", prompt)))
    assert [d.text for d in request.documents] == ["Paris is in France.", "Berlin is in Germany.", "Rome."]
    assert request.question == "Where is Rome?"
    moved = request.with_documents(request.documents[::-1]).render()["messages"][0]["content"]
    assert moved.endswith("\n\nWhere is Rome?")


def test_a_bare_question_after_numbered_sources_stays_out_of_the_last_one() -> None:
    prompt = "### Source 1\nParis is in France.\n\n### Source 2\nBerlin is in Germany.\n\nWhich city is German?"
    request = parse_request(chat(("user", prompt)))
    assert [d.raw for d in request.documents] == [
        "### Source 1\nParis is in France.",
        "### Source 2\nBerlin is in Germany.",
    ]
    assert request.question == "Which city is German?"


def test_a_question_before_the_context_is_found() -> None:
    prompt = "Question: Which city is German? \nContext: Paris is in France.\n---\nBerlin is in Germany. \nAnswer:"
    request = parse_request(chat(("user", prompt)))
    assert request.detection == "separated; region=label"
    assert request.question == "Which city is German?"
    assert request.block is not None
    assert request.block.head.startswith("Question: Which city is German?")


def test_a_context_region_without_any_question_is_left_alone() -> None:
    # "Context:" in its everyday sense: the rest of the message is the request itself.
    prompt = "Context: I'm writing to my landlord.\n\nCan you make this email more polite? The heating is broken."
    request = parse_request(chat(("user", prompt)))
    assert request.documents == ()
    assert request.detection == "none: no-question"
