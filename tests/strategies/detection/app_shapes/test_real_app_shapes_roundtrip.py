"""Detect, then render: every shape real apps send comes back byte for byte, and so does any arbitrary text;
documents moved and moved back also come back byte for byte."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextlift.strategies import DeclaredFormat, parse_request

JOIN = "\n\n---\n\n"
"""How the region shapes join their documents: blank lines alone never separate documents (each shape, joined by
blank lines alone, is declined: test_blank_line_joins_are_declined_and_rendered_back)."""
# Document text: no blank line inside and no marker words.
words = st.text(st.characters(whitelist_categories=["Ll", "Lu", "Nd"]), min_size=1, max_size=12)
sentence = st.lists(words, min_size=1, max_size=8).map(" ".join)
doc_texts = st.lists(sentence, min_size=2, max_size=7)
question = sentence.map(lambda s: s + "?")
any_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=300)


def fenced(docs: list[str], q: str) -> dict[str, Any]:
    context = JOIN.join(docs)
    return user(f"Context information is below.\n---------------------\n{context}\n---------------------\nQuery: {q}")


def labelled(docs: list[str], q: str) -> dict[str, Any]:
    return user(f"Question: {q} \nContext: " + JOIN.join(docs) + " \nAnswer:")


def announced(docs: list[str], q: str) -> dict[str, Any]:
    system = "Use the following pieces of retrieved context to answer.\n\n" + JOIN.join(docs)
    return {"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}]}


def wrapped(docs: list[str], q: str) -> dict[str, Any]:
    return user("<context>\n" + JOIN.join(docs) + f"\n</context>\n\n{q}")


def metadata(docs: list[str], q: str) -> dict[str, Any]:
    nodes = "\n\n".join(f"title: t{i}\nfile_name: f{i}.txt\n\n{d}" for i, d in enumerate(docs))
    return user(f"Context:\n{nodes}\n\nQuestion: {q}")


def sources(docs: list[str], q: str) -> dict[str, Any]:
    return user("".join(f"### Source {i}\n{d}\n\n" for i, d in enumerate(docs, 1)) + q)


def brackets(docs: list[str], q: str) -> dict[str, Any]:
    return user("".join(f"[{i}] «{d}»\n" for i, d in enumerate(docs, 1)) + f"\nQuestion: {q}")


def json_list(docs: list[str], q: str) -> dict[str, Any]:
    results = json.dumps([{"url": f"u{i}", "content": d} for i, d in enumerate(docs)], indent=1)
    return tool_results(q, [results])


def announced_in_system(docs: list[str], q: str) -> dict[str, Any]:
    results = "\n".join(f"[{i}] {d}" for i, d in enumerate(docs, 1))
    system = f"You are a search assistant. Use these search results and cite them as [n].\n\n{results}"
    return {"model": "m", "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}]}


def pasted_json(docs: list[str], q: str) -> dict[str, Any]:
    results = json.dumps([{"title": f"t{i}", "snippet": f"{d} today"} for i, d in enumerate(docs)], indent=2)
    return user(f"Here is what the search returned:\n{results}\n\n{q}")


def question_heading(docs: list[str], q: str) -> dict[str, Any]:
    return user("## Context\n\n" + JOIN.join(docs) + f"\n\n## Question\n\n{q}")


def question_after_instruction(docs: list[str], q: str) -> dict[str, Any]:
    return user("Context:\n" + JOIN.join(docs) + f"\n\nAnswer the following question using the context above: {q}")


def per_tool_message(docs: list[str], q: str) -> dict[str, Any]:
    return tool_results(q, docs)


def per_system_message(docs: list[str], q: str) -> dict[str, Any]:
    systems = [{"role": "system", "content": f"Document: {d}"} for d in docs]
    return {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, *systems, user(q)["messages"][0]]}


def user(content: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


def tool_results(q: str, contents: list[str]) -> dict[str, Any]:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "search"}} for i in range(len(contents))]
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": q},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"c{i}", "content": c} for i, c in enumerate(contents)),
        ],
    }


SHAPES: dict[str, Callable[[list[str], str], dict[str, Any]]] = {
    "separated; region=fence": fenced,
    "separated; region=label": labelled,
    "separated; region=cue": announced,
    "separated; region=wrapper": wrapped,
    "metadata-blocks; region=label": metadata,
    "numbered": sources,
    "numbered ": brackets,
    "json-list": json_list,
    "numbered; announced": announced_in_system,
    "json-list; embedded": pasted_json,
    "separated; region=label  ": question_heading,
    "separated; region=label   ": question_after_instruction,
    "messages; role=tool": per_tool_message,
    "messages; role=system": per_system_message,
}


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from(sorted(SHAPES)), docs=doc_texts, q=question)
def test_every_shape_is_found_and_rendered_back_byte_for_byte(shape: str, docs: list[str], q: str) -> None:
    body = SHAPES[shape](docs, q)
    original = copy.deepcopy(body)
    request = parse_request(body)
    assert request.detection == shape.strip()
    assert len(request.documents) == len(docs)
    assert request.question == q
    assert request.render() == original
    moved = request.with_documents(request.documents[::-1])
    assert moved.with_documents(request.documents).render() == original


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from(sorted(SHAPES)), docs=doc_texts, q=question)
def test_reversed_documents_keep_every_byte_around_them(shape: str, docs: list[str], q: str) -> None:
    request = parse_request(SHAPES[shape](docs, q))
    rendered = json.dumps(request.with_documents(request.documents[::-1]).render())
    # Each document's raw text appears, in the reversed order, after the one before it. (A reordered prompt
    # is not parsed again: numbered markers keep their numbers, `Source 2` before `Source 1`, so that an app's
    # citations still point at the source it numbered.)
    at = 0
    for document in request.documents[::-1]:
        found = rendered.find(json.dumps(document.raw)[1:-1], at)
        assert found >= at
        at = found + 1
    assert json.dumps(q)[1:-1] in rendered
    assert len(rendered) == len(json.dumps(request.render()))


REGION_SHAPES = (fenced, labelled, announced, wrapped, question_heading, question_after_instruction)


@settings(max_examples=60, deadline=None)
@given(shape=st.sampled_from(REGION_SHAPES), docs=doc_texts, q=question)
def test_blank_line_joins_are_declined_and_rendered_back(
    shape: Callable[[list[str], str], dict[str, Any]], docs: list[str], q: str
) -> None:
    blank_lines = json.loads(json.dumps(shape(docs, q)).replace("\\n\\n---\\n\\n", "\\n\\n"))
    original = copy.deepcopy(blank_lines)
    request = parse_request(blank_lines)
    assert request.detection == "none: ambiguous-chunks"
    assert request.render() == original


@settings(max_examples=200, deadline=None)
@given(head=any_text, middle=any_text, tail=any_text, role=st.sampled_from(["user", "system", "tool"]))
def test_any_text_renders_back_byte_for_byte(head: str, middle: str, tail: str, role: str) -> None:
    content = f"{head}\n------\n{middle}\n\nContext:\n{tail}"
    body = {"model": "m", "messages": [{"role": role, "content": content}, {"role": "user", "content": tail}]}
    original = copy.deepcopy(body)
    assert parse_request(body).render() == original


@settings(max_examples=100, deadline=None)
@given(docs=doc_texts, q=question, separator=st.sampled_from(["\n===\n", "\n\n"]))
def test_a_declared_format_renders_back_byte_for_byte(docs: list[str], q: str, separator: str) -> None:
    declared = DeclaredFormat(name="kb", start="<kb>", end="</kb>", separator=separator)
    body = user("<kb>" + separator.join(docs) + f"</kb>\n{q}")
    original = copy.deepcopy(body)
    request = parse_request(body, declared=[declared])
    assert request.detection == "declared:kb"
    assert [d.text for d in request.documents] == [d.strip() for d in docs]
    assert request.render() == original
