"""Hard distractors for a generated question: passages a retriever would return for it that do not answer it.

A retriever's hits for "What is the capital of the kingdom of Zorvath?" are about Zorvath, or about a name
close to it, and share the question's words; those, and not passages about unrelated inventions, are what a
reader must tell apart from the one that holds the answer. Three kinds, taken in turn:

- other facts about the question's entity, one per other template, each titled as that fact's article;
- a sentence on the question's subject (its key noun phrase) that does not give the answer, titled as the gold;
- near-misses: a neighbouring fact about the same entity (its second highest mountain, its largest market
  town), then the asked fact about similarly named entities.

Each is one such sentence among filler, the shape of the gold passage. None holds the answer as
`best_subspan_em` would match it, title included; a draw that would is dropped.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from contextlift.eval.metrics import holds_answer
from contextlift.eval.tasks.fiction import TEMPLATES, Fact, among_filler, invented_name, paragraph, similar_name
from contextlift.eval.tasks.litm import Passage

SENTENCES = 3
"""Per passage, as many as the generated gold passage has."""

# `{t}` the question's key noun phrase, `{e}` its entity. None names a place, person or thing that could be read
# as an answer.
_ON_TOPIC = (
    "Travellers who ask about {t} are often given different answers by different guides.",
    "Several old chronicles mention {t}, though none of them agree on the details.",
    "A recent survey of {e} devotes a whole chapter to {t}.",
    "Schoolchildren in {e} still learn the old songs about {t}.",
    "Letters from the last century discuss {t} at length, but most of them were never published.",
    "The guidebook to {e} says little about {t}, and most visitors leave without learning more.",
    "Scholars still argue about {t}, and each new study reopens the question.",
    "Questions about {t} come up every year at the public meetings of {e}.",
    "An exhibition in the small museum of {e} was once devoted to {t}.",
    "Few outsiders know much about {t}, even among those who have lived in {e} for years.",
)


def same_entity_distractors(rng: random.Random, gold: Fact, count: int) -> list[Passage]:
    """`count` distinct passages about `gold`'s entity or names like it, none holding `gold.answer`, shuffled."""
    kinds = [_other_facts(rng, gold), _on_topic(rng, gold), _near_misses(rng, gold)]
    passages: list[Passage] = []
    while len(passages) < count:
        for kind in list(kinds):
            passage = next(kind, None)
            if passage is None:
                kinds.remove(kind)
            elif passage not in passages and not holds_answer(f"{passage.title} {passage.text}", [gold.answer]):
                passages.append(passage)
                if len(passages) == count:
                    break
    rng.shuffle(passages)
    return passages


def _other_facts(rng: random.Random, gold: Fact) -> Iterator[Passage]:
    for template in rng.sample(TEMPLATES, len(TEMPLATES)):
        if template != gold.template:
            fact = template.fact(gold.entity, _other_answer(rng, gold))
            yield Passage(fact.title, paragraph(rng, fact, SENTENCES))


def _on_topic(rng: random.Random, gold: Fact) -> Iterator[Passage]:
    topic = gold.template.topic.format(e=gold.entity)
    for sentence in rng.sample(_ON_TOPIC, len(_ON_TOPIC)):
        yield Passage(gold.title, among_filler(rng, sentence.format(t=topic, e=gold.entity), SENTENCES))


def _near_misses(rng: random.Random, gold: Fact) -> Iterator[Passage]:
    """Without end: a draw of a similar name that keeps the answer inside it is dropped by the caller, and the
    next one swaps another end of the name."""
    neighbour = gold.template.neighbour.format(e=gold.entity, a=_other_answer(rng, gold))
    yield Passage(gold.title, among_filler(rng, neighbour, SENTENCES))
    used = {gold.entity.lower()}
    while True:
        name = similar_name(rng, gold.entity)
        if name.lower() not in used:
            used.add(name.lower())
            fact = gold.template.fact(name, _other_answer(rng, gold))
            yield Passage(fact.title, paragraph(rng, fact, SENTENCES))


def _other_answer(rng: random.Random, gold: Fact) -> str:
    while True:
        answer = invented_name(rng)
        if answer not in (gold.entity, gold.answer):
            return answer
