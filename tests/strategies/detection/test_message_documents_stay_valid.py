"""Documents that are whole messages (tool results, per-document system messages) or a tool's JSON list: every
strategy keeps the request one the API accepts. Each tool call keeps exactly one result, intermediate calls
never leave a tool call without its result, and text is never written into JSON."""

from __future__ import annotations

import json
from typing import Any

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import ScriptedUpstream

RESULTS = ["Paris is the capital of France.", "Berlin is the capital of Germany.", "Rome is the capital of Italy."]


def agent_body(contents: list[str]) -> dict[str, Any]:
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        for i in range(len(contents))
    ]
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You answer with the search tool."},
            {"role": "user", "content": "What is the capital of Germany?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"call_{i}", "content": c} for i, c in enumerate(contents)),
        ],
    }


async def run(selection: str, body: dict[str, Any], *answers: str) -> tuple[ScriptedUpstream, str]:
    pipeline = build_registry().resolve(parse_selection(selection), {})
    upstream = ScriptedUpstream(*answers)
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services(embedder=FakeEmbedder()))
    return upstream, result.applied


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def per_document_system_body() -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Instructions, one system message per document, then the question."""
    systems = [{"role": "system", "content": f"Document: {r}"} for r in RESULTS]
    question = {"role": "user", "content": "Capital of Germany?"}
    return systems, {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, *systems, question]}


def every_call_answered_once(body: dict[str, Any]) -> bool:
    calls = [c["id"] for m in body["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    return sorted(calls) == sorted(answered)


async def test_reorder_moves_whole_tool_messages_each_with_its_call_id() -> None:
    body = agent_body(RESULTS)
    upstream, applied = await run("reorder; order=descending", body)
    sent = upstream.bodies[0]
    assert applied == "reorder; order=descending"
    assert tool_results(sent) == tool_results(body)  # each result still answers its own call
    assert every_call_answered_once(sent)
    assert sent["messages"][:3] == body["messages"][:3]


async def test_a_budget_that_drops_results_leaves_their_calls_answered_empty() -> None:
    upstream, applied = await run("reorder; budget=8", agent_body(RESULTS))
    sent = upstream.bodies[0]
    assert "dropped=2" in applied
    assert every_call_answered_once(sent)
    assert sorted(tool_results(sent).values()).count("") == 2


async def test_recite_asks_before_the_tool_call_and_answers_with_every_call_answered() -> None:
    upstream, applied = await run("recite", agent_body(RESULTS), "Berlin is the capital of Germany.", "Berlin.")
    recitation, answer = upstream.bodies
    assert [m["role"] for m in recitation["messages"]] == ["system", "user", "user"]
    assert "Berlin is the capital of Germany." in recitation["messages"][-1]["content"]
    assert every_call_answered_once(answer)
    assert list(tool_results(answer).values()).count("Berlin is the capital of Germany.") == 1
    assert "evidence=1" in applied


async def test_fact_merges_two_facts_of_one_result_into_its_one_message() -> None:
    body = agent_body(["Berlin is the capital of Germany. It lies on the Spree river.", *RESULTS[:2]])
    retrieval = "- Berlin is the capital of Germany.\n- It lies on the Spree river."
    upstream, _ = await run("fact; rounds=1", body, retrieval, "Berlin.")
    answer = upstream.bodies[-1]
    assert every_call_answered_once(answer)
    assert tool_results(answer)["call_0"] == "Berlin is the capital of Germany.\nIt lies on the Spree river."


async def test_query_aware_writes_no_text_into_tool_results() -> None:
    body = agent_body(RESULTS)
    upstream, applied = await run("query-aware", body)
    assert upstream.bodies[0] == body
    assert applied == "query-aware; skipped=format"


async def test_a_json_list_stays_json_through_reorder_and_recite() -> None:
    results = json.dumps([{"url": f"https://example.org/{i}", "content": c} for i, c in enumerate(RESULTS)])
    body = agent_body([results, "unused"])
    body["messages"][2]["tool_calls"] = body["messages"][2]["tool_calls"][:1]
    body["messages"] = body["messages"][:4]
    upstream, _ = await run("reorder; order=descending", body)
    reordered = json.loads(upstream.bodies[0]["messages"][-1]["content"])
    assert sorted(r["content"] for r in reordered) == sorted(RESULTS)
    upstream, _ = await run("recite", body, "Berlin is the capital of Germany.", "Berlin.")
    assert json.loads(upstream.bodies[-1]["messages"][-1]["content"]) == ["Berlin is the capital of Germany."]


async def test_per_document_system_messages_are_reordered_as_messages() -> None:
    systems, body = per_document_system_body()
    upstream, _ = await run("reorder; order=descending", body)
    sent = upstream.bodies[0]["messages"]
    assert sent[0] == body["messages"][0]
    assert sorted(m["content"] for m in sent[1:4]) == sorted(s["content"] for s in systems)
    assert sent[-1] == body["messages"][-1]


async def test_recite_over_per_document_system_messages_keeps_the_instructions() -> None:
    _, body = per_document_system_body()
    upstream, _ = await run("recite", body, "Berlin is the capital of Germany.", "Berlin.")
    recitation = upstream.bodies[0]["messages"]
    assert recitation[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in recitation] == ["system", "user"]
