"""`recite` and `fact` accept what a model really copies: the prompt's own rendering of a document, headers,
bullets, quotes and headings included, small slips of case, spacing and punctuation, lines that cut or span
sentences; each located line stands for the document's own sentences, and invented text is dropped."""

from __future__ import annotations

import re
from typing import Any

import pytest

from contextlift.strategies import build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.builtin.recite import recited_evidence
from contextlift.strategies.pipeline import Services
from tests.fakes import FakeEmbedder
from tests.strategies.builtin.test_executor_prompts import BODY
from tests.strategies.framework_prompts import RELEVANT, SHAPE_NAMES, framework_prompts
from tests.strategies.scripted import ScriptedUpstream

CAPITAL = "The capital of Zorvath is Quellmoor."
RIVER = "It lies on a river."


async def recite(body: dict[str, Any], recitation: str) -> tuple[str, ScriptedUpstream]:
    upstream = ScriptedUpstream(recitation, "answer")
    pipeline = build_registry().resolve(parse_selection("recite"), {})
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services(embedder=FakeEmbedder()))
    return result.applied, upstream


def spaced(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize(
    ("recitation", "evidence"),
    [
        # The document line exactly as the prompt shows it.
        (f"Document [1](Title: Zorvath) {CAPITAL} {RIVER}", [f"{CAPITAL} {RIVER}"]),
        # A colon after the title, as models often add.
        (f"Document [1](Title: Zorvath): {CAPITAL}", [CAPITAL]),
        # The spelling the prompt asks for.
        (f"Document [1]: {CAPITAL}", [CAPITAL]),
        # Bullets, bold, quotes, headings and XML around the copy.
        (f'- "{CAPITAL}"', [CAPITAL]),
        (f"**Document 1:** {CAPITAL}", [CAPITAL]),
        (f"## Document [1]\n{CAPITAL}", [f"{CAPITAL} {RIVER}"]),
        (f'<document index="1">{CAPITAL}</document>', [CAPITAL]),
        # Case, spacing and punctuation slips.
        ("the   CAPITAL of zorvath is quellmoor", [CAPITAL]),
        # A line that cuts the first sentence and runs into the second takes both, as the document wrote them.
        ("capital of Zorvath is Quellmoor. It lies on", [f"{CAPITAL} {RIVER}"]),
        # A wrong document number: the line is found where it really is.
        (f"Document [3]: {CAPITAL}", [CAPITAL]),
        # Two documents, in the documents' order whatever the recitation's.
        (
            f"Document [2]: Brindle is a river town.\nDocument [1]: {CAPITAL}",
            [CAPITAL, "Brindle is a river town known for its ferries."],
        ),
    ],
)
async def test_a_copied_line_yields_the_documents_own_text(recitation: str, evidence: list[str]) -> None:
    applied, upstream = await recite(BODY, recitation)
    assert applied == f"recite; evidence={len(evidence)}"
    request = parse_request(BODY)
    found = recited_evidence(recitation, request)
    assert [d.text for d in found.evidence] == evidence
    assert upstream.bodies[1] == {**request.with_documents(found.evidence).render(), "max_tokens": 20}


@pytest.mark.parametrize(
    "recitation",
    [
        # The answer invented: most of its words are in no document.
        "Document [1]: The capital of Zorvath is Brindlemark, seat of king Oskar.",
        # The question repeated is not evidence.
        "Question: what is the capital of Zorvath?",
        # Too short to tell where it came from.
        "Zorvath.",
        "Document [9]: nothing like any document here whatsoever",
    ],
)
async def test_invented_or_empty_lines_are_not_evidence(recitation: str) -> None:
    applied, upstream = await recite(BODY, recitation)
    assert applied.startswith("recite; fallback=unmatched-recitation; lines=1; best-containment=")
    assert upstream.bodies[1] == BODY


def test_a_miss_reports_how_close_its_best_line_came() -> None:
    found = recited_evidence("Document [1]: The capital of Zorvath is Brindlemark.", parse_request(BODY))
    # document, 1, capital, zorvath found; brindlemark not: 4 of 5 content words... is a copy with one slip.
    assert [d.text for d in found.evidence] == [CAPITAL]
    found = recited_evidence("Zorvath has a king named Oskar who rules from Brindlemark.", parse_request(BODY))
    assert found.evidence == []
    assert found.failure == "unmatched-recitation; lines=1; best-containment=0.17"


@pytest.mark.parametrize("name", SHAPE_NAMES)
async def test_a_verbatim_recitation_in_each_frameworks_rendering_is_evidence(name: str) -> None:
    """The relevant document copied exactly as the recitation prompt showed it, in every real app's shape."""
    (prompt,) = [p for p in framework_prompts() if p.name == name]  # skipped without the data file
    request = parse_request(prompt.body)
    if request.detection == "none: ambiguous-chunks":
        # Blank-line paragraphs: no documents read, so recite runs as a plain call (test_real_chunks_never_split).
        applied, _ = await recite(prompt.body, prompt.documents[RELEVANT])
        assert applied == "none"
        return
    shown = request.documents_text()
    relevant = request.documents[RELEVANT]
    number = None if request.block is None or request.block.numbering_base is None else request.block.numbering_base
    rendered = relevant.rendered(None if number is None else number + RELEVANT, request.block.format)  # type: ignore[union-attr]
    copied = rendered if relevant.raw else relevant.text
    assert copied.strip() in shown or request.block.format.value in ("messages", "json-list")  # type: ignore[union-attr]
    applied, _ = await recite(prompt.body, copied)
    assert applied == "recite; evidence=1", applied
    (evidence,) = recited_evidence(copied, request).evidence
    assert spaced(evidence.text) == spaced(relevant.text)


async def test_a_copied_sentence_that_runs_on_with_invented_words_is_still_evidence() -> None:
    # SmolLM2 on litm-qa: the gold sentence copied, then a sentence of its own.
    recitation = (
        f"Document [1](Title: Zorvath) {CAPITAL} Its famous harbour welcomes sailors and merchants from "
        "distant shores every single summer season."
    )
    applied, _ = await recite(BODY, recitation)
    assert applied == "recite; evidence=1"
    assert [d.text for d in recited_evidence(recitation, parse_request(BODY)).evidence] == [CAPITAL]
