"""Findings of a hostile probe of detection, each pinned: prompts that are not retrieved context stay untouched,
real RAG prompts split where their documents really part, and no body that intake lets through makes
detection raise."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextlift.strategies import DeclaredFormat, DocumentLimits, parse_request
from tests.strategies.ordinary_prompts import ordinary_prompts

PROXY_LIMITS = DocumentLimits(max_documents=2_000, max_document_bytes=8 << 20)


def user(content: Any, *before: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [*before, {"role": "user", "content": content}]}


def system(content: str) -> dict[str, Any]:
    return {"role": "system", "content": content}


def untouched(body: dict[str, Any]) -> bool:
    original = copy.deepcopy(body)
    request = parse_request(body, PROXY_LIMITS)
    return request.documents == () and request.render() == original


def wrapped(content: Any, rule: str) -> Any:
    if not isinstance(content, str):
        return content
    return f"Here is my text:\n{rule}\n{content}\n{rule}\nPlease improve it."


@pytest.mark.parametrize("rule", ["----------", "=========="])
def test_ordinary_prompts_between_rules_stay_untouched(rule: str) -> None:
    # 136 of the 301 ordinary prompts, wrapped so, were read as fenced context.
    touched = []
    for name, body in ordinary_prompts():
        messages = [{**m, "content": wrapped(m["content"], rule)} for m in body["messages"]]
        if not untouched({**body, "messages": messages}):
            touched.append(name)
    assert touched == []


def test_ordinary_prompts_after_a_fenced_system_prompt_stay_untouched() -> None:
    rules = system("You are helpful.\n-----\nBe brief.\n\nBe kind.\n-----")
    touched = [n for n, b in ordinary_prompts() if not untouched({**b, "messages": [rules, *b["messages"]]})]
    assert touched == []


@pytest.mark.parametrize(
    "body",
    [
        user(
            "Translate to French:\n\nIntroduction\n------------\n\nOur company builds boats.\n\nWe sell them "
            "worldwide.\n\nProducts\n--------\n\nSailboats and kayaks."
        ),
        user("hello", system("You are a helpful assistant.\n---------------\nStep 1: greet the user.\n\nStep 2: ask.")),
        user("hello", system("Rules:\n[1] Be concise.\n[2] Never reveal the key.\n[3] Be kind.")),
        user("hello", system("Title: Assistant persona\nYou are Bob."), system("Title: Safety\nNever reveal secrets.")),
        user("Translate these UI strings:\n" + json.dumps({f"key_{i}": f"Label {i}" for i in range(2001)})),
        user("".join(f"[{i}] GET /health 200\n" for i in range(1, 2003))),
    ],
    ids=["rst-headings", "fenced-steps", "numbered-rules", "titled-system-messages", "2001-labels", "numbered-log"],
)
def test_everyday_structure_is_not_context_and_is_never_refused(body: dict[str, Any]) -> None:
    assert untouched(body)


def test_an_ordered_list_from_a_tool_is_not_reordered() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}
    steps = {"role": "tool", "tool_call_id": "c", "content": '["Step one: download", "Step two: unzip", "Step three"]'}
    assert untouched({"model": "m", "messages": [{"role": "user", "content": "How?"}, call, steps]})


def test_a_faq_line_inside_a_document_does_not_end_the_context() -> None:
    docs = [
        "Gift cards never expire.",
        "Shipping takes 3 days.",
        "FAQ\nQ: How do I reset my password?\nA: Use the link.",
        "Returns take 30 days.",
    ]
    body = user(
        "Do gift cards expire?",
        system("Use the following pieces of retrieved context to answer.\n\n" + JOIN.join(docs)),
    )
    request = parse_request(body)
    assert [d.text for d in request.documents] == docs
    assert request.question == "Do gift cards expire?"


def test_a_rule_inside_a_llamaindex_node_does_not_close_the_region() -> None:
    nodes = ["file_path: a.md\n\nIntro\n-----\nMore text.", "file_path: b.md\n\nOther text."]
    content = (
        "Context information is below.\n---------------------\n"
        + "\n\n".join(nodes)
        + "\n---------------------\nQuery: q?\nAnswer: "
    )
    request = parse_request(user(content))
    assert [d.raw for d in request.documents] == nodes


def test_llamaindex_nodes_with_long_metadata_are_documents_and_dated_paragraphs_stay_in_theirs() -> None:
    many = "\n".join(f"key_{i}: v{i}" for i in range(15))
    nodes = [
        "file_path: a.md\npage: 1\n\nAlpha text.\n\nDate: 2024-01-01\nAuthor: Bob\n\nMore alpha.",
        "file_path: b.txt\npage: 2\n\nBeta text.",
        f"file_path: c.md\n{many}\n\nGamma.",
    ]
    content = FENCED_HEAD + "\n\n".join(nodes) + "\n---------------------\nQuery: q?\nAnswer: "
    assert [d.raw for d in parse_request(user(content)).documents] == nodes


FENCED_HEAD = "Context information is below.\n---------------------\n"
JOIN = "\n\n---\n\n"
"""Chunks joined by a separator line: blank lines alone never separate documents."""


def test_citation_lines_inside_a_document_do_not_split_the_region() -> None:
    docs = ["Alpha is first.", "Beta cites:\n[1] one paper\n[2] another", "Gamma is last."]
    body = user("Which?", system("Use the following pieces of retrieved context.\n\n" + JOIN.join(docs)))
    assert [d.text for d in parse_request(body).documents] == docs


def test_a_named_shape_wins_over_the_operators_declared_format() -> None:
    declared = [DeclaredFormat(name="mine", separator="\n\n")]
    prompt = "Document [1](Title: A) a\nDocument [2](Title: B) b\n\nQuestion: q?"
    assert parse_request(user(prompt), declared=declared).detection == "declared:mine"
    assert parse_request(user(prompt), declared=declared, shape="litm").detection == "litm"


@pytest.mark.parametrize(
    "body",
    [
        user('{"a": ' + "1" * 4301 + "}"),
        user("Context:\n[" + "1" * 5000 + ', "x"]\n\nQuestion: q?'),
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]},
                {"role": "tool", "tool_call_id": "c", "content": "[" + "1" * 5000 + ', "x"]'},
            ],
        },
    ],
    ids=["kv-object", "region-list", "tool-list"],
)
def test_an_integer_json_refuses_is_no_error(body: dict[str, Any]) -> None:
    assert untouched(body)


@pytest.mark.parametrize("ids", [[["a"], ["b"]], [None, None], ["a", "a"]], ids=["lists", "missing", "shared"])
def test_tool_results_whose_ids_do_not_tell_them_apart_are_left_alone(ids: list[Any]) -> None:
    calls = [{"id": "a", "type": "function"}, {"id": "b", "type": "function"}]
    results = [{"role": "tool", "tool_call_id": i, "content": f"result {n}"} for n, i in enumerate(ids)]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "q?"}, {"role": "assistant", "tool_calls": calls}, *results],
    }
    assert untouched(body)


def test_an_instructions_paragraph_after_the_context_is_not_a_document() -> None:
    prompt = "Context:\nAlpha.\n---\nBeta.\n\nInstructions:\nBe brief.\n\nQuestion: What is alpha?"
    request = parse_request(user(prompt))
    assert [d.text for d in request.documents] == ["Alpha.", "Beta."]


def test_a_context_sentence_two_lines_above_the_fence_announces_it() -> None:
    prompt = (
        "Use the following pieces of context to answer the question.\n\nBe concise.\n"
        "----------------\nAlpha.\n---\nBeta."
    )
    request = parse_request(user("What is alpha?", system(prompt)))
    assert [d.text for d in request.documents] == ["Alpha.", "Beta."]


@pytest.mark.parametrize(
    "above",
    ["Source code:", "For context, I'm a student.", "See the document below.", "My sources say this:"],
)
def test_a_context_word_above_a_fence_is_not_a_cue(above: str) -> None:
    assert untouched(user(f"{above}\n-----\nimport os\n\nprint(1)\n-----\nWhy does this fail?"))
    rules = system(f"You are a bot. {above}\n-----\nBe polite.\n\nBe brief.\n-----")
    assert untouched(user("hi", rules))


def test_a_list_that_opens_the_first_document_does_not_split_the_region() -> None:
    docs = ["[1] Smith found X.\n[2] Jones found Y.", "Another doc.", "Third doc."]
    prompt = "Use the following pieces of retrieved context to answer.\n\n" + JOIN.join(docs) + "\n\nQuestion: Who?"
    assert [d.text for d in parse_request(user(prompt)).documents] == docs


def test_a_long_numbered_log_with_a_later_question_is_left_alone_not_refused() -> None:
    log = "".join(f"[{i}] GET /health 200\n" for i in range(1, 2003))
    body = user("What went wrong?", {"role": "user", "content": log}, {"role": "assistant", "content": "ok"})
    assert untouched(body)


def test_a_declared_format_of_a_separator_alone_needs_the_separator() -> None:
    """Declared with neither start nor end, a format whose separator is nowhere in a plain question found it as one
    document with an empty question (`declared:lc`): a wrong detection, where none is right."""
    declared = [DeclaredFormat(name="lc", separator="\n---\n")]
    plain = {"model": "m", "messages": [{"role": "user", "content": "How high is Mont Blanc?"}]}
    assert parse_request(copy.deepcopy(plain), declared=declared).detection.startswith("none")
    two = {"model": "m", "messages": [{"role": "system", "content": "Alpine facts.\n---\nGlacier facts."},
                                      {"role": "user", "content": "How high is Mont Blanc?"}]}  # fmt: skip
    found = parse_request(copy.deepcopy(two), declared=declared)
    assert (found.detection, len(found.documents)) == ("declared:lc", 2)
