"""`medoid`: k concurrent calls over independent permutations, the medoid answer, absence filtering,
partial failure, cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from contextlift.strategies import Completion, Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.builtin.medoid import says_absent
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import FakeFailure, ScriptedUpstream

DOCS = [f"Document [{i}](Title: T{i}) fact number {i}" for i in range(1, 8)]
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "\n".join(DOCS) + "\n\nQuestion: which?\nAnswer:"}],
    "stream": False,
}


async def run(selection: str, upstream: ScriptedUpstream) -> tuple[Any, str]:
    pipeline = build_registry().resolve(parse_selection(selection), {})
    result = await run_pipeline(pipeline, parse_request(BODY), upstream, Services(embedder=FakeEmbedder()))
    return result.outcome, result.applied


def orders(upstream: ScriptedUpstream) -> list[list[str]]:
    return [[line.split(") ")[1] for line in p.splitlines() if line.startswith("Document")] for p in upstream.prompts]


async def test_k_calls_with_independent_permutations_reproducible_by_seed() -> None:
    first, second, third = ScriptedUpstream(), ScriptedUpstream(), ScriptedUpstream()
    await run("medoid; k=5; seed=7", first)
    await run("medoid; k=5; seed=7", second)
    await run("medoid; k=5; seed=8", third)
    assert len(first.bodies) == 5
    assert orders(first) == orders(second)
    assert orders(first) != orders(third)
    assert len({tuple(o) for o in orders(first)}) > 1
    assert all(sorted(o) == sorted(f"fact number {i}" for i in range(1, 8)) for o in orders(first))
    # Documents are renumbered by position in every permutation.
    assert all(p.splitlines()[0].startswith("Document [1]") for p in first.prompts)


async def test_permute_off_keeps_the_order_so_only_sampling_varies() -> None:
    upstream = ScriptedUpstream()
    await run("medoid; k=3; permute=off", upstream)
    assert orders(upstream) == [[f"fact number {i}" for i in range(1, 8)]] * 3


async def test_the_medoid_answer_is_returned_with_usage_of_all_calls() -> None:
    upstream = ScriptedUpstream("Paris is the capital", "Lyon", "the capital is Paris", "Paris capital", "Marseille")
    outcome, applied = await run("medoid; k=5; seed=1", upstream)
    assert applied == "medoid; k=5; seed=1; agreement=3/5"
    assert isinstance(outcome, Completion)
    assert outcome.body["choices"][0]["message"]["content"] == "Paris is the capital"
    assert outcome.body["usage"] == {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}


async def test_absent_answers_are_dropped_before_voting() -> None:
    upstream = ScriptedUpstream(
        "The information is not mentioned in the context.", "Not found in the documents", "Paris", "Paris.", "Lyon"
    )
    outcome, applied = await run("medoid; k=5", upstream)
    assert applied == "medoid; k=5; absent=2; agreement=2/5"
    assert outcome.body["choices"][0]["message"]["content"] in {"Paris", "Paris."}


async def test_all_absent_still_votes_among_them() -> None:
    upstream = ScriptedUpstream("I don't know", "unknown", "I don't know")
    outcome, _ = await run("medoid; k=3", upstream)
    assert outcome.body["choices"][0]["message"]["content"] == "I don't know"


async def test_partial_failure_votes_among_the_rest_and_says_so() -> None:
    upstream = ScriptedUpstream("Paris", FakeFailure("503"), "Paris", FakeFailure("timeout"), "Lyon")
    outcome, applied = await run("medoid; k=5", upstream)
    assert applied == "medoid; k=5; failed=2; agreement=2/3"
    assert outcome.body["choices"][0]["message"]["content"] == "Paris"


async def test_all_failing_raises_the_upstream_error() -> None:
    failure = FakeFailure("first")
    upstream = ScriptedUpstream(failure, FakeFailure("second"))
    with pytest.raises(FakeFailure, match="first"):
        await run("medoid; k=2", upstream)


async def test_cancelling_the_request_cancels_every_call_in_flight() -> None:
    upstream = ScriptedUpstream("hang", "hang", "hang")
    task = asyncio.ensure_future(run("medoid; k=3", upstream))
    # Until all three calls are in flight (a fixed pause was too short on a loaded machine: rendering the
    # prompts runs in worker threads first), within a deadline.
    for _ in range(1000):  # 10 s at most
        await asyncio.sleep(0.01)
        if len(upstream.bodies) == 3:
            break
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert upstream.cancelled == 3


@pytest.mark.parametrize(
    ("answer", "absent"),
    [("Not mentioned in the provided documents.", True), ("The context does not contain it", True),
     ("", True), ("Quellmoor", False), ("It is not Paris but Lyon", False)],
)  # fmt: skip
def test_absence_phrases(answer: str, absent: bool) -> None:
    assert says_absent(answer) is absent


async def test_voting_calls_sample_at_swims_temperature_unless_the_step_says_otherwise() -> None:
    upstream = ScriptedUpstream()
    await run("medoid; k=3", upstream)
    assert [b["temperature"] for b in upstream.bodies] == [0.7] * 3
    upstream = ScriptedUpstream()
    await run("medoid; k=2; temperature=0", upstream)
    assert [b["temperature"] for b in upstream.bodies] == [0.0] * 2


async def test_agreement_counts_the_answers_that_say_what_the_medoid_says() -> None:
    upstream = ScriptedUpstream("Paris", "Paris", "Paris", "Lyon", "Marseille")
    _, applied = await run("medoid; k=5", upstream)
    assert applied == "medoid; k=5; agreement=3/5"
