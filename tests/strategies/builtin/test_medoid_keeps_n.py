"""`medoid` with the client's `n`: n choices, the n most central answers, medoid first (it used to return one)."""

from __future__ import annotations

from typing import Any

from contextlift.strategies import Completion, Services, build_registry, parse_request, parse_selection, run_pipeline
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import ScriptedUpstream

PROMPT = "\n".join(f"Document [{i}](Title: T{i}) fact {i}" for i in range(1, 5)) + "\n\nQuestion: which?"


async def vote(n: int | None, *answers: str) -> Completion:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
    if n is not None:
        body["n"] = n
    pipeline = build_registry().resolve(parse_selection("medoid; k=5; seed=1"), {})
    upstream = ScriptedUpstream(*answers)
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services(embedder=FakeEmbedder()))
    assert all("n" not in b for b in upstream.bodies)  # each call asks for one answer
    assert isinstance(result.outcome, Completion)
    return result.outcome


def contents(completion: Completion) -> list[str]:
    return [c["message"]["content"] for c in completion.body["choices"]]


async def test_n_choices_come_back_indexed_in_order() -> None:
    completion = await vote(2, "Paris", "Paris", "Paris", "Lyon", "Marseille")
    assert [c["index"] for c in completion.body["choices"]] == [0, 1]
    assert contents(completion)[0] == "Paris"
    assert completion.body["usage"]["prompt_tokens"] == 50  # every call's usage counted once


async def test_without_n_one_choice() -> None:
    assert len(contents(await vote(None, "Paris", "Paris", "Paris", "Lyon", "Marseille"))) == 1


async def test_n_above_k_gives_every_answer() -> None:
    assert len(contents(await vote(7, "a", "b", "c", "d", "e"))) == 5


async def _voting_bodies(selection: str, services: Services) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
    upstream = ScriptedUpstream("a", "b", "c")
    await run_pipeline(
        build_registry().resolve(parse_selection(selection), {}), parse_request(body), upstream, services
    )
    return upstream.bodies


async def test_a_seeded_medoid_sends_the_same_calls_each_time_with_a_sampling_seed_per_call() -> None:
    seeded = Services(embedder=FakeEmbedder(), seed=7)
    first = await _voting_bodies("medoid; k=3; permute=off", seeded)
    assert first == await _voting_bodies("medoid; k=3; permute=off", seeded)
    # One prompt three times: only their seeds make the three sampled answers differ.
    assert len({b["seed"] for b in first}) == 3
    unseeded = await _voting_bodies("medoid; k=3; permute=off", Services(embedder=FakeEmbedder()))
    assert len({b["seed"] for b in unseeded}) == 3
