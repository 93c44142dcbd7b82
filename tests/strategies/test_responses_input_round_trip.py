"""A Responses API body seen as chat messages and written back: unchanged, it is the body the client sent, whatever
its input holds (a string, messages with text, image and file parts, function calls and their outputs, instructions);
a move or an edit changes only the text a step changed and the order of what it moved, each call's id with its
output. An input the chat view cannot say exactly gives no view, with the item's type as the reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contextlift.strategies import parse_request
from contextlift.strategies.responses_api import as_chat, responses_body

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is about topic {i}" for i in range(1, 6))
INPUTS: dict[str, Any] = {
    "string": f"{DOCS}\n\nQuestion: which fact comes first?\nAnswer:",
    "parts": [
        {"role": "user", "content": [
            {"type": "input_text", "text": "Chunk one about castles."},
            {"type": "input_image", "image_url": "https://example.test/a.png", "detail": "low"},
            {"type": "input_text", "text": "Chunk two about rivers."},
            {"type": "input_file", "file_id": "file-1"},
            {"type": "input_text", "text": "Which chunk is about rivers?"},
        ]},
    ],
    "conversation": [
        {"type": "message", "role": "developer", "content": "Answer from the tools' results."},
        {"role": "user", "content": "Find the tower's height."},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Searching.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "search", "arguments": "{}"},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "search", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "The tower is 330 m tall."},
        {"type": "function_call_output", "call_id": "c2", "output": "The tower opened in 1889.", "status": "completed"},
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_an_unchanged_view_writes_back_the_body_as_sent(name: str) -> None:
    body = {"model": "m", "input": copy.deepcopy(INPUTS[name]), "instructions": "Be brief.", "store": False}
    view = as_chat(body)
    assert view.decline is None
    assert responses_body(body, parse_request(view.body).render()) == body
    assert body == {"model": "m", "input": INPUTS[name], "instructions": "Be brief.", "store": False}


def test_a_move_of_tool_results_keeps_each_call_id_with_its_output() -> None:
    body = {"model": "m", "input": copy.deepcopy(INPUTS["conversation"])}
    found = parse_request(as_chat(body).body)
    assert found.detection == "messages; role=tool"
    moved = found.with_documents(found.documents[::-1]).render()
    items = responses_body(body, moved)["input"]
    assert items[:5] == INPUTS["conversation"][:5]
    assert items[5:] == [INPUTS["conversation"][6], INPUTS["conversation"][5]]


def test_a_move_of_text_parts_keeps_their_fields_and_types() -> None:
    parts = [{"type": "input_text", "text": f"Chunk {n} about {topic}.", "cache_control": {"type": "ephemeral"}}
             for n, topic in ((1, "castles"), (2, "rivers"), (3, "wine"))]  # fmt: skip
    body = {"model": "m", "input": [{"role": "user", "content": [*parts, {"type": "input_text", "text": "Rivers?"}]}]}
    found = parse_request(as_chat(body).body)
    assert found.detection == "parts"
    content = responses_body(body, found.with_documents(found.documents[::-1]).render())["input"][0]["content"]
    assert content == [*parts[::-1], {"type": "input_text", "text": "Rivers?"}]


def test_an_image_between_text_parts_is_read_as_the_chat_route_reads_it() -> None:
    found = parse_request(as_chat({"model": "m", "input": copy.deepcopy(INPUTS["parts"])}).body)
    assert found.detection == "none: non-text-parts"  # an image's place among the chunks is the app's label


def test_documents_in_the_instructions_are_written_back_there() -> None:
    body = {"model": "m", "instructions": f"Use these documents.\n\n{DOCS}", "input": "Which fact comes first?"}
    found = parse_request(as_chat(body).body)
    assert len(found.documents) == 5
    written = responses_body(body, found.with_documents(found.documents[::-1]).render())
    assert written["input"] == "Which fact comes first?"
    assert written["instructions"].index("Document [1](Title: T5)") < written["instructions"].index("(Title: T1)")


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ([{"type": "reasoning", "id": "rs_1", "summary": []}], "none: unsupported-input-item=reasoning"),
        ([{"type": "item_reference", "id": "msg_0"}], "none: unsupported-input-item=item_reference"),
        ([{"type": "file_search_call", "id": "fs_1", "queries": [], "status": "completed"}],
         "none: unsupported-input-item=file_search_call"),
        ([{"role": "user", "content": {"not": "a list"}}], "none: unsupported-input-item=message"),
        ([["a list"]], "none: unsupported-input-item=unknown"),
        (None, "none: no-input"),
        ([], "none: no-input"),
    ],
)  # fmt: skip
def test_an_input_the_view_cannot_say_gives_no_view(given: Any, reason: str) -> None:
    assert as_chat({"model": "m", "input": given}).decline == reason
