"""Invented entities and facts, so that no model can answer from memory: the offline source of the QA,
SWiM and haystack tasks. Everything is drawn from a `random.Random` the caller seeds."""

from __future__ import annotations

import random
from dataclasses import dataclass

_SYLLABLES = [
    "zor",
    "vath",
    "quel",
    "moor",
    "brin",
    "dle",
    "ost",
    "mark",
    "vel",
    "lan",
    "har",
    "row",
    "tes",
    "sa",
    "ly",
    "dun",
    "more",
    "cad",
    "dock",
    "lo",
    "ris",
    "ka",
    "mir",
    "tal",
    "wen",
    "fro",
    "gel",
    "pim",
    "nar",
    "osk",
    "thu",
    "bel",
    "kor",
    "ith",
    "ven",
    "dra",
    "sil",
    "um",
    "qua",
    "rel",
    "fen",
    "tor",
]


@dataclass(frozen=True, slots=True)
class Template:
    """How one kind of invented fact is stated, asked and titled: `{e}` the entity, `{a}` the answer."""

    statement: str
    question: str
    title: str
    topic: str
    """The question's key noun phrase, for passages that talk about the subject without giving the answer."""
    neighbour: str
    """A different fact that reads almost like `statement`, with an answer of its own: a near-miss."""

    def fact(self, entity: str, answer: str) -> Fact:
        """This kind of fact about `entity`, with `answer` as its answer."""
        return Fact(
            entity,
            answer,
            self.statement.format(e=entity, a=answer),
            self.question.format(e=entity),
            self.title.format(e=entity),
            self,
        )


TEMPLATES = (
    Template(
        "The capital of the kingdom of {e} is {a}.",
        "What is the capital of the kingdom of {e}?",
        "Kingdom of {e}",
        "the capital of the kingdom of {e}",
        "The largest market town of the kingdom of {e} is {a}.",
    ),
    Template(
        "The river that runs through {e} is called the {a}.",
        "What is the river that runs through {e} called?",
        "{e} (region)",
        "the river that runs through {e}",
        "The canal that runs beside {e} is called the {a}.",
    ),
    Template(
        "The founder of the city of {e} was a weaver named {a}.",
        "Who founded the city of {e}?",
        "{e} (city)",
        "the founder of the city of {e}",
        "The first mayor of the city of {e} was a weaver named {a}.",
    ),
    Template(
        "The highest mountain of {e} is Mount {a}.",
        "What is the highest mountain of {e}?",
        "Geography of {e}",
        "the highest mountain of {e}",
        "The second highest mountain of {e} is Mount {a}.",
    ),
    Template(
        "The inventor of the {e} engine was an engineer called {a}.",
        "Who invented the {e} engine?",
        "{e} engine",
        "the inventor of the {e} engine",
        "The first buyer of the {e} engine was a miller called {a}.",
    ),
    Template(
        "The {e} festival is held every year in the town of {a}.",
        "In which town is the {e} festival held?",
        "{e} festival",
        "the town where the {e} festival is held",
        "The {e} fair is held every year in the town of {a}.",
    ),
)

# Sentences around a fact, so a generated document reads like an encyclopedia paragraph and not like a needle.
_FILLER = (
    "Records from that period are incomplete, and historians still disagree about the exact dates.",
    "Travellers in the last century described the place as quiet, with narrow streets and old stone bridges.",
    "Most of the surrounding land is farmed, and the harvest season brings visitors from nearby villages.",
    "A small museum keeps maps, letters and tools that local families donated over the years.",
    "The climate is mild for most of the year, although winters can bring heavy rain from the west.",
    "Several books have been written about its history, but few of them were ever translated.",
    "Trade with neighbouring regions grew steadily once the new road was finished.",
    "Local schools teach the old dialect alongside the national language.",
    "The annual market draws craftspeople who sell pottery, woven cloth and carved wood.",
    "Its archives were moved twice during the floods and some documents were lost.",
    "The region is known for its orchards, its slow rivers and its long summer evenings.",
    "Public meetings were once held in the main square, under a large chestnut tree.",
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One invented fact, the question it answers, and a title for the document that states it."""

    entity: str
    answer: str
    statement: str
    question: str
    title: str
    template: Template


def invented_name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def similar_name(rng: random.Random, name: str) -> str:
    """A name that reads almost like `name` and is not it: its start or end swapped for another syllable, or one
    more syllable at its end (a near-miss, as Georgia is to Georgian)."""
    while True:
        syllable = rng.choice(_SYLLABLES)
        cut = min(rng.randint(2, 3), len(name) - 2)
        candidate = rng.choice((syllable + name[cut:], name[:-cut] + syllable, name + syllable)).capitalize()
        if candidate.lower() != name.lower():
            return candidate


def invented_facts(rng: random.Random, count: int) -> list[Fact]:
    """`count` facts about distinct invented entities, with answers that appear nowhere else among them."""
    facts: list[Fact] = []
    used: set[str] = set()
    while len(facts) < count:
        entity, answer = invented_name(rng), invented_name(rng)
        if entity in used or answer in used or entity == answer:
            continue
        used.update((entity, answer))
        facts.append(rng.choice(TEMPLATES).fact(entity, answer))
    return facts


def paragraph(rng: random.Random, fact: Fact, sentences: int) -> str:
    """The fact among `sentences - 1` filler sentences, at a random place: a document of a few lines."""
    return among_filler(rng, fact.statement, sentences)


def among_filler(rng: random.Random, sentence: str, sentences: int) -> str:
    """`sentence` among `sentences - 1` filler sentences, at a random place."""
    filler = rng.sample(_FILLER, min(max(sentences - 1, 0), len(_FILLER)))
    filler.insert(rng.randint(0, len(filler)), sentence)
    return " ".join(filler)


def filler_text(rng: random.Random, sentences: int) -> str:
    """Bland prose with no facts in it: the haystack between needles."""
    return " ".join(rng.choice(_FILLER) for _ in range(sentences))
