"""Document detection: each supported format yields its documents, titles, question and instructions."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from contextlift.strategies import DocumentFormat, parse_request
from tests.benchmark_data import LITM_KV_75, data_file

INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)


def body(content: Any, *extra: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [*extra, {"role": "user", "content": content}]}


def test_lost_in_the_middle_prompt() -> None:
    prompt = (
        f"{INSTRUCTION}\n\nDocument [1](Title: Paris (city)) Paris is the capital.\n"
        "Document [2](Title: Lyon) Lyon is a city.\n\nQuestion: what is the capital of France?\nAnswer:"
    )
    request = parse_request(body(prompt))
    assert request.block is not None
    assert request.block.format is DocumentFormat.LITM
    assert [d.title for d in request.documents] == ["Paris (city)", "Lyon"]
    assert [d.text for d in request.documents] == ["Paris is the capital.", "Lyon is a city."]
    assert request.question == "what is the capital of France?"
    assert request.instructions == INSTRUCTION


def test_xml_documents_with_attributes() -> None:
    prompt = (
        'Use these:\n<document index="1" title="A">first\nmultiline</document>\n'
        '<document index="2" title="B">second</document>\nWhat is first?'
    )
    request = parse_request(body(prompt))
    assert request.block is not None
    assert request.block.format is DocumentFormat.XML
    assert [(d.title, d.text) for d in request.documents] == [("A", "first\nmultiline"), ("B", "second")]
    assert request.question == "What is first?"


def test_doc_tags() -> None:
    request = parse_request(body("<doc>one</doc><doc>two</doc><doc>three</doc>\nQ: which?"))
    assert [d.text for d in request.documents] == ["one", "two", "three"]
    assert request.question == "which?"


def test_headed_blocks_end_at_the_question() -> None:
    prompt = "Read.\n\nDocument 1: Alpha text.\n\nDocument 2: Beta\ncontinues.\n\nQuestion: what is beta?"
    request = parse_request(body(prompt))
    assert request.block is not None
    assert request.block.format is DocumentFormat.HEADED
    assert [d.text for d in request.documents] == ["Alpha text.", "Beta\ncontinues."]
    assert request.question == "what is beta?"


def test_markdown_headed_blocks_with_titles() -> None:
    prompt = "## Document 1: Cats\nCats purr.\n\nThey sleep.\n## Document 2: Dogs\nDogs bark.\n\nQuestion: who purrs?"
    request = parse_request(body(prompt))
    assert [(d.title, d.text) for d in request.documents] == [
        ("Cats", "Cats purr.\n\nThey sleep."),
        ("Dogs", "Dogs bark."),
    ]
    assert request.question == "who purrs?"


def test_json_key_value_records_from_the_paper_file() -> None:
    with gzip.open(data_file(LITM_KV_75), "rt") as handle:
        example = json.loads(handle.readline())
    records = example["ordered_kv_records"]
    # The paper's rendering: one pair per line inside a JSON object.
    data = "{" + ",\n ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in records) + "}"
    prompt = (
        "Extract the value corresponding to the specified key in the JSON object below.\n\n"
        f'JSON data:\n{data}\n\nKey: "{example["key"]}"\nCorresponding value:'
    )
    request = parse_request(body(prompt))
    assert request.block is not None
    assert request.block.format is DocumentFormat.JSON_KV
    assert len(request.documents) == 75
    assert [d.title for d in request.documents] == [k for k, _ in records]
    assert request.question == f'"{example["key"]}"'
    assert request.render() == body(prompt)


def test_documents_as_content_parts() -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": "Doc one."},
        {"type": "text", "text": "Doc two."},
        {"type": "text", "text": "Which doc mentions two?"},
    ]
    request = parse_request(body(parts))
    assert request.block is not None
    assert request.block.format is DocumentFormat.PARTS
    assert [d.text for d in request.documents] == ["Doc one.", "Doc two."]
    assert request.question == "Which doc mentions two?"
    moved = request.with_documents(request.documents[::-1]).render()["messages"][-1]["content"]
    assert [p.get("text") for p in moved] == [None, "Doc two.", "Doc one.", "Which doc mentions two?"]


def test_an_image_between_text_parts_leaves_the_message_alone() -> None:
    # Moving the text parts around the image would separate it from the text it belongs with.
    parts = [
        {"type": "text", "text": "Doc one."},
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": "Doc two."},
        {"type": "text", "text": "Which doc mentions two?"},
    ]
    request = parse_request(body(parts))
    assert request.documents == ()
    assert request.detection == "none: non-text-parts"
    assert request.render() == body(parts)


def test_documents_in_the_system_message_and_question_in_the_user_message() -> None:
    system = {"role": "system", "content": "<doc>alpha</doc>\n<doc>beta</doc>"}
    request = parse_request(body("Which is first?", system))
    assert request.block is not None
    assert request.block.message_index == 0
    assert len(request.documents) == 2
    assert request.question == "Which is first?"


def test_no_documents_means_a_plain_request() -> None:
    request = parse_request(body("Tell me a joke about {braces} and Document numbers."))
    assert request.documents == ()
    assert request.block is None
    assert request.render() == body("Tell me a joke about {braces} and Document numbers.")


def test_reordered_litm_documents_are_renumbered_by_position() -> None:
    prompt = "Document [1](Title: A) a\nDocument [2](Title: B) b\nDocument [3](Title: C) c\n\nQuestion: q?"
    request = parse_request(body(prompt))
    reordered = request.with_documents(list(reversed(request.documents))).render()
    assert reordered["messages"][-1]["content"] == (
        "Document [1](Title: C) c\nDocument [2](Title: B) b\nDocument [3](Title: A) a\n\nQuestion: q?"
    )


def test_dropping_documents_keeps_the_surrounding_text() -> None:
    prompt = "Intro\n<doc>a</doc>\n<doc>b</doc>\n<doc>c</doc>\nOutro"
    request = parse_request(body(prompt))
    kept = request.with_documents(request.documents[:2]).render()
    assert kept["messages"][-1]["content"] == "Intro\n<doc>a</doc>\n<doc>b</doc>\nOutro"


@pytest.mark.parametrize("value", ["text", [1], [{"title": "t"}], [{"id": "a", "url": "u"}], []])
def test_a_documents_field_of_another_shape_is_left_for_the_upstream(value: Any) -> None:
    # The upstream may accept shapes the proxy cannot read (it used to answer 400 for them): left untouched.
    request_body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "documents": value}
    request = parse_request(request_body)
    assert request.documents == ()
    assert request.detection == "none: unrecognised-documents-field"
    assert request.render() == request_body


@pytest.mark.parametrize(
    "items",
    [
        [{"id": "1", "snippet": "alpha"}, {"id": "2", "snippet": "beta"}],  # Cohere
        [{"doc_id": "1", "content": "alpha"}, {"doc_id": "2", "content": "beta"}],
        [{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}],  # vLLM's RAG chat templates
        ["alpha", "beta"],
    ],
)
def test_documents_field_entries_of_known_shapes_are_read(items: list[Any]) -> None:
    request = parse_request({"model": "m", "messages": [{"role": "user", "content": "Which?"}], "documents": items})
    assert [d.text for d in request.documents] == ["alpha", "beta"]
    assert request.detection == "documents-field"
    assert request.question == "Which?"
