"""`query-aware`, `recite` and `fact`: the exact prompts sent, the number of calls, fallbacks and usage sums."""

from __future__ import annotations

from typing import Any

from contextlift.strategies import Completion, Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.builtin.prompts import FACT_RETRIEVAL_PROMPT, RECITE_PROMPT
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import ScriptedUpstream

INSTRUCTION = "Write a high-quality answer for the given question using only the provided search results."
DOCS = [
    ("Zorvath", "The capital of Zorvath is Quellmoor. It lies on a river."),
    ("Brindle", "Brindle is a river town known for its ferries."),
    ("Ostmark", "Ostmark exports copper and wool."),
]
LINES = "\n".join(f"Document [{i}](Title: {t}) {x}" for i, (t, x) in enumerate(DOCS, 1))
PROMPT = f"{INSTRUCTION}\n\n{LINES}\n\nQuestion: what is the capital of Zorvath?\nAnswer:"
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}],
    "max_tokens": 20,
    "temperature": 0.0,
}


async def run(selection: str, upstream: ScriptedUpstream, body: dict[str, Any] = BODY) -> tuple[Any, str]:
    pipeline = build_registry().resolve(parse_selection(selection), {})
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services(embedder=FakeEmbedder()))
    return result.outcome, result.applied


async def test_query_aware_puts_the_question_before_the_documents_too() -> None:
    upstream = ScriptedUpstream("Quellmoor")
    _, applied = await run("query-aware", upstream)
    assert applied == "query-aware"
    assert upstream.prompts == [
        f"{INSTRUCTION}\n\nQuestion: what is the capital of Zorvath?\n\n{LINES}\n\n"
        "Question: what is the capital of Zorvath?\nAnswer:"
    ]


async def test_recite_copies_evidence_then_answers_from_it_alone() -> None:
    recitation = "Document [1]: The capital of Zorvath is Quellmoor.\nDocument [3]: Made-up sentence not in it."
    upstream = ScriptedUpstream(recitation, "Quellmoor")
    outcome, applied = await run("recite", upstream)
    assert applied == "recite; evidence=1"
    assert len(upstream.bodies) == 2
    first, second = upstream.bodies
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": RECITE_PROMPT.format(documents=LINES, question="what is the capital of Zorvath?")},
    ]
    assert first["max_tokens"] == 512
    assert second["messages"][-1]["content"] == (
        f"{INSTRUCTION}\n\nDocument [1](Title: Zorvath) The capital of Zorvath is Quellmoor.\n\n"
        "Question: what is the capital of Zorvath?\nAnswer:"
    )
    assert second["max_tokens"] == 20
    assert isinstance(outcome, Completion)
    assert outcome.body["usage"] == {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}


async def test_recite_falls_back_when_nothing_matches() -> None:
    upstream = ScriptedUpstream("Document [2]: Something no document says at all.", "answer")
    _, applied = await run("recite", upstream)
    assert applied == "recite; fallback=unmatched-recitation; lines=1; best-containment=0.33"
    assert upstream.bodies[1] == BODY


async def test_recite_falls_back_on_an_empty_recitation() -> None:
    upstream = ScriptedUpstream("NONE", "answer")
    _, applied = await run("recite", upstream)
    assert applied == "recite; fallback=empty-recitation"
    assert len(upstream.bodies) == 2


async def test_fact_removes_found_facts_and_stops_when_nothing_new() -> None:
    upstream = ScriptedUpstream(
        "- The capital of Zorvath is Quellmoor.",
        "- Brindle is a river town known for its ferries.\n- The capital of Zorvath is Quellmoor.",
        "-",
        "Quellmoor",
    )
    outcome, applied = await run("fact; rounds=5", upstream)
    assert applied == "fact; rounds=5; retrievals=3; facts=2"
    question = "what is the capital of Zorvath?"
    assert upstream.prompts[0] == FACT_RETRIEVAL_PROMPT.format(question=question, documents=LINES)
    # Round 2: the found sentence is gone from document 1.
    assert upstream.prompts[1] == FACT_RETRIEVAL_PROMPT.format(
        question=question,
        documents="Document [1](Title: Zorvath) It lies on a river.\n"
        f"Document [2](Title: Brindle) {DOCS[1][1]}\nDocument [3](Title: Ostmark) {DOCS[2][1]}",
    )
    assert upstream.prompts[3] == (
        f"{INSTRUCTION}\n\nDocument [1](Title: Zorvath) The capital of Zorvath is Quellmoor.\n"
        "Document [2](Title: Brindle) Brindle is a river town known for its ferries.\n\n"
        "Question: what is the capital of Zorvath?\nAnswer:"
    )
    assert outcome.body["usage"]["total_tokens"] == 4 * 12


async def test_fact_without_any_fact_answers_the_original_request() -> None:
    upstream = ScriptedUpstream("- an invented sentence", "answer")
    _, applied = await run("fact", upstream)
    assert applied == "fact; retrievals=1; facts=0; fallback=no-facts; best-containment=0.00"
    assert upstream.bodies[-1] == BODY


async def test_executors_without_documents_make_one_plain_call() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    for selection in ("recite", "fact", "medoid", "query-aware, recite"):
        upstream = ScriptedUpstream("hi")
        _, applied = await run(selection, upstream, body)
        assert applied == "none"
        assert upstream.bodies == [body]


async def test_recite_streams_its_final_call_with_summed_usage() -> None:
    from tests.fakes import chunk

    usage_chunk = chunk(usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})
    upstream = ScriptedUpstream(
        "Document [1]: The capital of Zorvath is Quellmoor.", stream_events=[chunk("Q"), usage_chunk]
    )
    outcome, _ = await run("recite", upstream, {**BODY, "stream": True})
    events = [e async for e in outcome.events()]
    assert len(upstream.bodies) == 1
    assert "stream" not in upstream.bodies[0]
    assert upstream.streamed[0]["stream"] is True
    import json

    assert json.loads(events[-1])["usage"] == {"prompt_tokens": 15, "completion_tokens": 3, "total_tokens": 18}
