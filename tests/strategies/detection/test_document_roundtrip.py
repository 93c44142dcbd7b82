"""Rendering a parsed request without changes reproduces the original messages exactly, for every format and
for arbitrary text."""

from __future__ import annotations

import html
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextlift.strategies import parse_request

line_text = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), max_size=40)
any_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=200)
titles = st.one_of(st.none(), line_text)


def litm(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    lines = [
        f"Document [{i}](Title: {t}) {x}" if t is not None else f"Document [{i}] {x}"
        for i, (t, x) in enumerate(docs, 1)
    ]
    return head + "\n".join(lines) + tail


def xml(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    return head + "\n".join(f'<document index="{i}">{x}</document>' for i, (_, x) in enumerate(docs, 1)) + tail


def headed(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    return head + "\n\n".join(f"Document {i}: {x}" for i, (_, x) in enumerate(docs, 1)) + tail


def json_kv(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    records = {f"{t}-{i}": x for i, (t, x) in enumerate(docs)}
    return head + json.dumps(records, indent=1) + tail


def announced_results(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    results = "\n".join(f"[{i}] {x}" for i, (_, x) in enumerate(docs, 1))
    return f"{head}Use these search results and cite them as [n].\n\n{results}{tail}"


def pasted_json(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    results = [{"title": t, "content": f"{x} and more"} for t, x in docs]
    return f"{head}\n{json.dumps(results, indent=2)}\n{tail}"


def question_below(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    context = "\n\n".join(x for _, x in docs)
    return f"{head}\nContext:\n{context}\n\n### Question\n{tail}\n\nAnswer the question above: {tail}"


def roundtrip(body: dict[str, Any]) -> None:
    original = json.loads(json.dumps(body))
    assert parse_request(body).render() == original


documents = st.lists(st.tuples(titles, line_text), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    builder=st.sampled_from([litm, xml, headed, json_kv, announced_results, pasted_json, question_below]),
    docs=documents,
    head=any_text,
    tail=any_text,
    in_system=st.booleans(),
)
def test_every_format_round_trips(
    builder: Any, docs: list[tuple[str | None, str]], head: str, tail: str, in_system: bool
) -> None:
    content = builder(docs, head, tail)
    messages = [{"role": "user", "content": content}]
    if in_system:
        messages = [{"role": "system", "content": content}, {"role": "user", "content": tail}]
    roundtrip({"model": "m", "messages": messages, "temperature": 0.5})


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(any_text, min_size=1, max_size=6), roles=st.lists(st.sampled_from(["system", "user", "assistant"]))
)
def test_arbitrary_messages_round_trip(texts: list[str], roles: list[str]) -> None:
    messages = [{"role": (roles[i] if i < len(roles) else "user"), "content": t} for i, t in enumerate(texts)]
    roundtrip({"model": "m", "messages": messages})


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(any_text, min_size=1, max_size=6), with_image=st.booleans())
def test_content_parts_round_trip(texts: list[str], with_image: bool) -> None:
    parts: list[dict[str, Any]] = [{"type": "text", "text": t, "cache_control": {"type": "ephemeral"}} for t in texts]
    if with_image:
        parts.insert(1, {"type": "image_url", "image_url": {"url": "data:,"}})
    roundtrip({"model": "m", "messages": [{"role": "user", "content": parts}]})


titles_with_line_breaks = st.one_of(
    st.none(), st.text(st.sampled_from(["a", " ", ")", "(", "\r", "\v", "\f", "\x85", "\u2028", "\u2029"]), max_size=12)
)


@settings(max_examples=100, deadline=None)
@given(
    docs=st.lists(st.tuples(titles_with_line_breaks, line_text), min_size=1, max_size=6),
    head=any_text,
    tail=any_text,
)
def test_titles_holding_line_breaks_round_trip(docs: list[tuple[str | None, str]], head: str, tail: str) -> None:
    # Line breaks other than "\n" can sit inside a detected title; a document nobody moved is sent as written.
    roundtrip({"model": "m", "messages": [{"role": "user", "content": litm(docs, head, tail)}]})


MARKDOWN = [
    "```yaml\n---\nmodel: gpt-4\n---\n```",
    "---\ntitle: Front matter\ntags: [a, b]\n---\n\n# The page",
    "Setext title\n---",
    "A reStructuredText title\n=========",
    "A paragraph.\n\n---\n\nAnother, after the chunk's own rule.",
    "<doc>a quoted document</doc>\n<doc>and another</doc>",
    "Document [1](Title: inner) a line\nDocument [2](Title: inner) another",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "> quoted\n>\n> ---",
    "ID: 3\n└── Content:\nquoted node",
    "- query: a YAML line\n  compiled: x",
    "Filename: quoted.md\nSource: 9 \n a quoted source",
]
"""What real chunks of documentation hold (`tests/strategies/detection/test_marked_up_chunks_never_moved_apart.py`
cuts them from real pages), including other formats' and the app templates' own labels."""
marked_up = st.lists(
    st.tuples(titles, st.builds(lambda a, b, c: f"{a}\n\n{b}\n\n{c}", line_text, st.sampled_from(MARKDOWN), line_text)),
    min_size=2,
    max_size=6,
)


def separated(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    return f"{head}\nContext:\n" + "\n\n---\n\n".join(x for _, x in docs) + f"\n\nQuestion: {tail}"


def xml_titled(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    # A file name as an attribute holds no quote or angle bracket: escaped, as a well-formed tag writes it.
    names = [html.escape(t or "f", quote=True) for t, _ in docs]
    sources = "\n".join(
        f'<source id="{i}" name="{n}">{x}</source>' for i, (n, (_, x)) in enumerate(zip(names, docs, strict=True), 1)
    )
    return f"{head}\n<context>\n{sources}\n</context>\n{tail}"


def ragflow(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    nodes = [f"\nID: {i}\n├── Title: {t or 'f'}\n└── Content:\n{x}" for i, (t, x) in enumerate(docs)]
    knowledge = "\n------\n" + "\n\n------\n\n".join(nodes)
    return f"{head}\n      Here is the knowledge base:\n      {knowledge}\n      The above is the knowledge base.{tail}"


def quivr(docs: list[tuple[str | None, str]], head: str, tail: str) -> str:
    written = "\n\n".join(f"Filename: {t or 'f'}\nSource: {i} \n {x}" for i, (t, x) in enumerate(docs))
    return (
        f"{head}\n- You have access to the following context to complete the task: {written}\n"
        f"- Follow these user instruction when crafting the answer: None\nHuman: Original task: {tail}\n"
    )


MARKED_UP_BUILDERS = [separated, xml_titled, ragflow, quivr, question_below]


@settings(max_examples=150, deadline=None)
@given(builder=st.sampled_from(MARKED_UP_BUILDERS), docs=marked_up, head=any_text, tail=line_text)
def test_chunks_that_hold_markdown_and_labels_round_trip(
    builder: Any, docs: list[tuple[str | None, str]], head: str, tail: str
) -> None:
    roundtrip({"model": "m", "messages": [{"role": "user", "content": builder(docs, head, tail)}]})


@settings(max_examples=150, deadline=None)
@given(builder=st.sampled_from([xml_titled, ragflow, quivr]), docs=marked_up, tail=line_text)
def test_labelled_chunks_that_hold_markdown_and_labels_move_whole_or_not_at_all(
    builder: Any, docs: list[tuple[str | None, str]], tail: str
) -> None:
    docs = [(t, f"chunk {i}: {x}") for i, (t, x) in enumerate(docs)]  # each chunk told apart from the others
    body = {"model": "m", "messages": [{"role": "user", "content": builder(docs, "Answer from the context.", tail)}]}
    request = parse_request(body)
    if not request.documents:
        return
    assert request.detection.split(";")[0] in ("xml", "app"), "units inside a chunk were read"
    assert len(request.documents) == len(docs)
    assert all(x.strip() in (d.raw or "") for d, (_, x) in zip(request.documents, docs, strict=True))
    moved = request.with_documents(request.documents[::-1]).render()["messages"][0]["content"]
    positions = [moved.find(x.strip()) for _, x in docs]
    assert all(p >= 0 for p in positions)
    assert positions == sorted(positions, reverse=True)
