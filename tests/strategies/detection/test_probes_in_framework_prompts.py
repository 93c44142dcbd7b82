"""Positional probes (strategies.probes) in the prompts real frameworks send (framework_prompts.py): the probe's
request, detected again, has the same format and number of documents, the needle in the document at the probe's
position and nowhere else, and the probe's question where the framework put the question; the client's request
is not changed. Skipped without Lost in the Middle's oracle file (tests/benchmark_data.py)."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

from contextlift.strategies import parse_request
from contextlift.strategies.probes import KINDS, make_probe, place_probe, probe_correct
from tests.strategies.framework_prompts import framework_prompts

PROMPTS = {p.name: p for p in framework_prompts()}
READ = sorted(name for name, p in PROMPTS.items() if parse_request(copy.deepcopy(p.body)).documents)
"""The shapes whose documents are read (the others, blank-line paragraphs, are declined and get no probe)."""


def test_a_declined_shape_gets_no_probe() -> None:
    request = parse_request(copy.deepcopy(PROMPTS["langchain-stuff-system"].body))
    assert request.detection == "none: ambiguous-chunks"
    assert make_probe(request, seed=7) is None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", READ)
def test_a_probe_keeps_the_framework_shape(name: str, kind: str) -> None:
    body = copy.deepcopy(PROMPTS[name].body)
    before = json.dumps(body, sort_keys=True)
    request = parse_request(body)
    probe = make_probe(request, seed=7, kind=kind)
    assert probe is not None, request.detection
    placed = place_probe(request, probe)
    assert [p.position for p in placed] == ["first", "middle", "last"]
    assert [p.index for p in placed] == [0, 2, 4]
    for p in placed:
        again = parse_request(p.request.render())
        assert again.detection == request.detection
        assert len(again.documents) == len(request.documents)
        holding = [i for i, d in enumerate(again.documents) if probe.needle in d.text]
        assert holding == [p.index]
        assert again.question == probe.question
        assert probe.value not in json.dumps(body)
    assert json.dumps(body, sort_keys=True) == before  # the client's request is untouched


def test_fresh_names_and_values_occur_nowhere_in_the_request() -> None:
    request = parse_request(copy.deepcopy(PROMPTS["llamaindex-query-engine"].body))
    text = json.dumps(request.body).lower()
    for seed in range(50):
        probe = make_probe(request, seed)
        assert probe is not None
        named = probe.needle.split(" rents")[0].split(" keeps")[0].split(" is ")[0]
        names = [named.removeprefix("The access code of ")]
        assert all(part.lower() not in text for name in names for part in name.split())
        assert probe.value not in text
    assert {make_probe(request, seed).kind for seed in range(50)} == set(KINDS)  # type: ignore[union-attr]


_STOP = {"the", "a", "an", "in", "of", "to", "has", "been", "which", "whoever", "is", "what"}


def _words(text: str) -> set[str]:
    return {w.strip(".,?").lower() for w in text.split()} - _STOP


def test_a_nolima_question_shares_no_word_with_its_needle_and_its_distractors_do() -> None:
    from contextlift.strategies.rankers.lexical import Lexical

    request = parse_request(copy.deepcopy(PROMPTS["llamaindex-query-engine"].body))
    found_first = placements = 0
    for seed in range(40):
        probe = make_probe(request, seed, kind="nolima")
        assert probe is not None
        assert not _words(probe.question) & _words(probe.needle)
        assert len(probe.distractors) == 2
        assert all(probe.document != index for index, _ in probe.distractors)
        person = probe.needle.split(" keeps")[0]
        for _, sentence in probe.distractors:
            assert sentence.startswith(person)
            assert not any(c.isdigit() for c in sentence)
            assert not _words(sentence) & _words(probe.question)
        for placed in place_probe(request, probe):
            asked = placed.request
            scores = asyncio.run(Lexical().scores(asked.question, asked.documents, None))  # type: ignore[arg-type]
            best = max(range(len(scores)), key=lambda i: scores[i])
            found_first += best == placed.index
            placements += 1
    # What the probe is for: a ranker that matches words finds the needle's document no more often than the
    # client's order does (first in a third of the placements: where the probe put it first).
    assert found_first / placements <= 0.4


def test_scoring_finds_the_value_and_only_it() -> None:
    assert probe_correct("The access code is 4719305.", "4719305")
    assert probe_correct("It is 4,719,305", "4719305")
    assert not probe_correct("It is 47193051", "4719305")
    assert not probe_correct("I do not know", "4719305")
