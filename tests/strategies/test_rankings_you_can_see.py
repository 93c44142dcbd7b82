"""Every ranked step keeps the ranking it ranked by, and `render_rankings` says it as `X-Context-Scores` does: the
client's document numbers best first with their scores, the ranker, the margin, a fallback by name, and no more than
`MAX_SCORED` documents per step."""

from __future__ import annotations

import pytest

from contextlift.strategies import (
    ChatRequest,
    Document,
    Services,
    StepContext,
    apply_transforms,
    build_registry,
    parse_request,
    parse_selection,
    render_rankings,
)
from contextlift.strategies.pipeline import MAX_SCORED
from contextlift.strategies.plugin import AppliedStep
from contextlift.strategies.rankers import Ranking
from tests.strategies.scripted import ScriptedUpstream

QUESTION = "What is the highest mountain in the Alps?"
CHUNKS = [
    "The Matterhorn is a mountain of the Alps.",
    "Mont Blanc is the highest mountain in the Alps, at 4,805 m.",
    "The Eiger is in the Bernese Alps.",
]


def request() -> ChatRequest:
    content = "\n".join(f"<doc>{c}</doc>" for c in CHUNKS) + f"\n\nQuestion: {QUESTION}"
    return parse_request({"model": "m", "messages": [{"role": "user", "content": content}]})


async def steps_of(selection: str, found: ChatRequest) -> list[AppliedStep]:
    pipeline = build_registry().resolve(parse_selection(selection), {})
    context = StepContext(ScriptedUpstream([]), Services())
    await apply_transforms(pipeline, found, context)
    return context.applied


async def test_each_ranked_step_names_its_ranker_margin_and_the_clients_numbers_best_first() -> None:
    found = request()
    steps = await steps_of("filter; ranker=lexical; margin=1, reorder; ranker=lexical; order=descending", found)
    rendered = render_rankings(steps, found.documents)
    assert rendered is not None
    first, second = rendered.split(" | ")
    assert first.startswith("filter; ranker=lexical; margin=")
    assert second.startswith("reorder; ranker=lexical; margin=")
    numbers = [entry.split("=")[0] for entry in first.split(": ", 1)[1].split(", ")]
    assert numbers[0] == "2", "the Mont Blanc chunk ranks first"
    assert sorted(numbers) == ["1", "2", "3"]


async def test_no_ranked_step_gives_no_header() -> None:
    found = request()
    assert render_rankings(await steps_of("repeat", found), found.documents) is None


def test_a_ranker_that_fell_back_says_why_and_lists_no_scores() -> None:
    documents = tuple(Document(text=c) for c in CHUNKS)
    fell_back = Ranking([3.0, 2.0, 1.0], "minilm", "no-embedder")
    step = AppliedStep("reorder", "reorder", ranking=fell_back, ranked=documents)
    assert render_rankings([step], documents) == "reorder; ranker=minilm; fallback=no-embedder"


@pytest.mark.parametrize("count", [MAX_SCORED - 1, MAX_SCORED, MAX_SCORED + 9])
def test_at_most_max_scored_documents_are_listed(count: int) -> None:
    documents = tuple(Document(text=f"chunk {i}") for i in range(count))
    ranking = Ranking([float(i) for i in range(count)], "lexical")
    rendered = render_rankings([AppliedStep("reorder", "reorder", ranking=ranking, ranked=documents)], documents)
    assert rendered is not None
    entries = rendered.split(": ", 1)[1].split(", ")
    assert len(entries) == min(count, MAX_SCORED) + (count > MAX_SCORED)
    assert entries[0] == f"{count}={count - 1:.4g}", "best first: the last document scored highest"
    if count > MAX_SCORED:
        assert entries[-1] == f"...+{count - MAX_SCORED}"


def test_a_document_a_step_wrote_is_named_by_its_place() -> None:
    found = tuple(Document(text=c) for c in CHUNKS)
    written = (found[0], Document(text="a summary a step wrote"))
    step = AppliedStep("reorder", "reorder", ranking=Ranking([0.1, 0.9], "lexical"), ranked=written)
    assert render_rankings([step], found) == "reorder; ranker=lexical; margin=1.000: #2=0.9, 1=0.1"
