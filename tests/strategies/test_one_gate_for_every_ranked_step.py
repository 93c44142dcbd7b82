"""Every ranked step stands behind one gate: where its ranker's margin is under the ranker's gate (measured,
docs/results/ranker-gates; the operator's; the request's `gate=`), the step does nothing, the body goes on byte for
byte, and the step says `skipped=margin; margin=0.070`. A plugin's ranked step gets the same gate without a line of
its own. The client's order has no gate; a ranker nobody measured acts and says `gate=unmeasured`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.plugin import ChatRequest, Params, StepContext, Transform, rank
from contextlift.strategies.rankers import Ranker, RankerSet, published_rankers
from contextlift.strategies.rankers.gate import merged
from contextlift.strategies.request import Document
from tests.strategies.gates import MEASURED
from tests.strategies.scripted import ScriptedUpstream

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "In which year did Ola Berg found the Varden Institute?"
# The hard regime's trap: the same entity founding something else in another year shares every word of the question
# but one; BM25 cannot tell the two apart by much.
NEAR_MISS = [
    "Ola Berg grew up in a fishing town and studied law before turning to archaeology.",
    "Ola Berg founded the Kessel Society, a rival to the Varden circle, in 1934.",
    "The Varden Institute was founded by Ola Berg in 1921, in a rented room above a bakery.",
    "Berg's later years were spent writing a history of the Varden valley's farms.",
]
CLEAR = [
    "Alpha grows in spring and is harvested in the autumn.",
    "Beta is a river that floods every second year.",
    "Gamma rays come from stars and from the decay of atomic nuclei.",
    "Delta lies at the mouth of the river, where it meets the sea.",
]


def body(texts: Sequence[str], question: str) -> dict[str, object]:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(texts, 1))
    content = f"Answer from the documents.\n\n{lines}\n\nQuestion: {question}\nAnswer:"
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


async def sent(
    selection: str, texts: Sequence[str], question: str, gates: dict[str, float] | None = None
) -> tuple[dict[str, object], str]:
    registry = build_registry()
    pipeline = registry.resolve(parse_selection(selection), {})
    upstream = ScriptedUpstream()
    rankers = RankerSet(published_rankers(), gates=merged(gates) if gates is not None else MEASURED)
    request = parse_request(body(texts, question))
    result = await run_pipeline(pipeline, request, upstream, Services(rankers=rankers))
    return upstream.bodies[-1], result.applied


RANKED = ["reorder", "reorder; order=edges-first", "filter; top=1", "focus", "excerpt"]


@pytest.mark.parametrize("selection", RANKED)
async def test_under_the_measured_gate_each_ranked_step_sends_the_body_as_it_came(selection: str) -> None:
    original = body(NEAR_MISS, QUESTION)
    sent_body, applied = await sent(selection, NEAR_MISS, QUESTION)
    assert sent_body == original
    notes = applied.split("; ")
    assert "skipped=margin" in notes
    margin = float(next(n for n in notes if n.startswith("margin=")).removeprefix("margin="))
    assert margin < MEASURED["lexical"]


@pytest.mark.parametrize("selection", RANKED)
async def test_a_request_that_opens_the_gate_gets_the_step(selection: str) -> None:
    sent_body, applied = await sent(f"{selection}; gate=0", NEAR_MISS, QUESTION)
    assert "skipped=margin" not in applied
    assert sent_body != body(NEAR_MISS, QUESTION) or selection.startswith("filter")  # filter top=1 may keep doc 1


async def test_where_the_ranker_is_sure_the_step_acts_behind_the_measured_gate() -> None:
    sent_body, applied = await sent("reorder", CLEAR, "Where do gamma rays come from?")
    assert "skipped" not in applied
    content = sent_body["messages"][0]["content"]  # type: ignore[index]
    first = next(line for line in content.splitlines() if line.startswith("Document"))
    assert "Gamma rays" in first


async def test_the_operators_gate_is_merged_over_the_measured_ones() -> None:
    _, applied = await sent("reorder", CLEAR, "Where do gamma rays come from?", gates={"lexical": 1.0})
    assert "skipped=margin" in applied
    _, applied = await sent("reorder", NEAR_MISS, QUESTION, gates={"lexical": 0.0})
    assert "skipped" not in applied


async def test_the_clients_order_has_no_gate() -> None:
    _, applied = await sent("reorder; ranker=client; order=edges-last", NEAR_MISS, QUESTION)
    assert applied == "reorder; ranker=client; order=edges-last"


class Unmeasured(Ranker):
    name = "svc"

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        return [0.0, 0.1, 0.2, 0.3][: len(documents)]


async def test_a_ranker_nobody_measured_acts_and_says_so() -> None:
    registry = build_registry()
    rankers = RankerSet({**published_rankers(), "svc": Unmeasured()}, gates=MEASURED)
    registry.rankers = frozenset(rankers.rankers)
    request = parse_request(body(CLEAR, "Where do gamma rays come from?"))
    upstream = ScriptedUpstream()
    pipeline = registry.resolve(parse_selection("reorder; ranker=svc"), {})
    result = await run_pipeline(pipeline, request, upstream, Services(rankers=rankers))
    assert result.applied == "reorder; ranker=svc; gate=unmeasured"


class Ranked(Transform):
    """A plugin's ranked step: it ranks through `rank` and moves the best document last. No gate of its own."""

    name: ClassVar[str] = "last-best"
    ranks: ClassVar[bool] = True
    moves: ClassVar[bool] = True

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        best = (await rank(request, params, context)).order()[0]
        docs = list(request.documents)
        return request.with_documents([d for i, d in enumerate(docs) if i != best] + [docs[best]])


async def test_a_plugins_ranked_step_stands_behind_the_same_gate() -> None:
    registry = build_registry()
    registry.register(Ranked())
    pipeline = registry.resolve(parse_selection("last-best"), {})
    upstream = ScriptedUpstream()
    request = parse_request(body(NEAR_MISS, QUESTION))
    services = Services(rankers=RankerSet(published_rankers(), gates=MEASURED))
    result = await run_pipeline(pipeline, request, upstream, services)
    assert upstream.bodies[-1] == body(NEAR_MISS, QUESTION)
    assert result.applied.startswith("last-best; skipped=margin; margin=0.")


def test_the_shipped_gates_are_the_measured_ones() -> None:
    measured = json.loads((ROOT / "docs/results/ranker-gates/gates.json").read_text(encoding="utf-8"))["gates"]
    assert {name: MEASURED[name] for name in measured} == measured
    assert MEASURED["client"] == 0.0
