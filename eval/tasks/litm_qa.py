"""`litm-qa`: Lost in the Middle's multi-document QA. The paper's prompt and document lines (or, with the
`prompt` option, a framework's shape: `eval.tasks.prompt_shapes`), the gold at each position among N documents, plus
the closed-book and oracle baselines. Closed-book is the question alone under every shape: with no documents
there is no app's shape to copy.

Sources of the `standard` cases, in order of preference for each (N, position): the paper's positional file;
the oracle file with distractors drawn from other questions' gold passages that hold no answer (the report says
so); otherwise a generated fictional-fact QA, deterministic from the seed.

Those distractors are easy to tell from the gold: another entity, other words. A real retriever's are about the
question's own subject without holding its answer, and with them reordering by position does no better than a
random order (Cuconasu et al. 2025). The `distractors` option (`easy,hard,squad`, comma-separated) asks for
each regime as a variant of its own, so that one run shows every strategy under each. By default a run builds
`easy,hard`: the hard regime is the one users' retrieval resembles, and the easy one beside it is where a lift of
reordering shows. The quick profile pins `easy` alone, so that its minutes stay what they were:

- `easy`, variant `standard`: the cases above, unchanged.
- `hard`, variant `hard`: the generated question and gold passage (those of `standard` when no QA file is
  given), among passages about the same invented entity and near-misses (`contextlift.eval.tasks.same_entity`).
- `squad`, variant `hard-squad`: an answerable SQuAD 2.0 dev question, its paragraph as the gold, among other
  paragraphs of the same Wikipedia article that hold none of its answers (`contextlift.eval.tasks.squad`).

Closed-book and oracle run once per distinct question: `hard` shares `standard`'s when its question and gold are
the same (generated), and otherwise has its own (`hard closed-book`, `hard oracle`), as `hard-squad` always does.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from contextlift.eval.cases import Case, Grid, TaskInfo, case_rng, resolve_positions
from contextlift.eval.sources import Sources
from contextlift.eval.tasks.chunks import CHUNKS, chunker
from contextlift.eval.tasks.fiction import Fact, invented_facts, paragraph
from contextlift.eval.tasks.litm import (
    Passage,
    QAExample,
    closed_book_prompt,
    distractors_from_other_questions,
    load_qa,
    place,
)
from contextlift.eval.tasks.prompt_shapes import PROMPT, Chat
from contextlift.eval.tasks.registry import Option, Task
from contextlift.eval.tasks.same_entity import same_entity_distractors
from contextlift.eval.tasks.squad import SameArticleQuestion, same_article_questions

INFO = TaskInfo(
    "litm-qa", "Multi-document QA (Lost in the Middle)", "documents", "gold document index", "best_subspan_em"
)
MAX_TOKENS = 32
"""The paper allows 100; answers are a few words, only the first line is scored, and on CPU every generated
token costs time across thousands of requests."""
DISTRACTORS = {"easy": "standard", "hard": "hard", "squad": "hard-squad"}
"""Each value of the `distractors` option and the variant its cases are reported as: `easy` keeps the name its
cases always had, so earlier runs' cache entries and reports keep their case keys."""

Examples = dict[int, tuple[QAExample, list[Passage]]]
"""Per gold position: the example and its documents in order, the gold at that position."""


@functools.cache
def _load(path: Path) -> list[QAExample]:
    return load_qa(path)


def paper_positions(documents: int) -> list[int]:
    """0, 4, 9, ...: the paper's gold positions for 10, 20 and 30 documents."""
    return [0, *range(4, documents, 5)]


def distractor_regimes(text: str) -> list[str]:
    """The `distractors` option's values, in the order of `DISTRACTORS` whatever the order given.

    Raises:
        ValueError: an unknown value, or none.
    """
    chosen = {v.strip() for v in text.split(",") if v.strip()}
    unknown = sorted(chosen - set(DISTRACTORS))
    if unknown:
        raise ValueError(f"unknown distractors {', '.join(unknown)}; choose {', '.join(DISTRACTORS)}")
    if not chosen:
        raise ValueError(f"no distractors named; choose {', '.join(DISTRACTORS)}")
    return [regime for regime in DISTRACTORS if regime in chosen]


REGIMES = Option("distractors", "easy,hard", distractor_regimes)
"""`--option litm-qa.distractors=easy,hard,squad`: the distractor regimes to build, each its own variant."""
QUICK_REGIMES = "easy"
"""The quick profile's regimes: one, so that its cases (and the end-to-end test that runs it) cost what they did
before `hard` joined the default; `--option litm-qa.distractors=easy,hard` asks for both."""


def build(grid: Grid, sources: Sources) -> tuple[list[Case], list[str]]:
    shape = PROMPT.read(grid)
    regimes = REGIMES.read(grid)
    if "squad" in regimes and sources.squad is None:
        raise ValueError(
            "litm-qa: distractors=squad reads SQuAD 2.0's dev file (squad-v2.0-dev.json); "
            "give the folder that holds it with --data"
        )
    chunks = chunker(grid.seed, sources.squad) if CHUNKS.read(grid) == "paragraphs" else None
    generated = "easy" in regimes or "hard" in regimes
    oracle = _load(sources.qa_oracle) if sources.qa_oracle and generated else None
    cases: list[Case] = []
    for size in grid.sizes:
        positions = resolve_positions(grid.positions, size, indexed=True) if grid.positions else paper_positions(size)
        for sample in range(grid.samples):
            standard = _examples(grid, sources, oracle, size, positions, sample) if generated else {}
            variants: dict[str, Examples] = {}
            if "easy" in regimes:
                variants["standard"] = standard
            if "hard" in regimes:
                variants["hard"] = _at_positions(_hard(grid.seed, size, sample), positions)
            if sources.squad is not None and "squad" in regimes:
                variants["hard-squad"] = _at_positions(_squad(grid.seed, sources.squad, size, sample), positions)
            baselines: dict[str, QAExample] = {}
            for variant, examples in variants.items():
                for position, (example, documents) in examples.items():
                    if chunks is not None:
                        documents = chunks.chunked(documents, example.answers)
                    chat = shape(example.question, documents)
                    cases.append(_case(variant, size, position, sample, chat, example.answers))
                first, _ = next(iter(examples.values()))
                shares = variant == "standard" or (variant == "hard" and _same_question(first, standard))
                # Named `closed-book` when the question is standard's, `hard-squad closed-book` when it is its own.
                baselines.setdefault("" if shares else f"{variant} ", first)
            for prefix, example in baselines.items():
                gold = chunks.chunked([example.gold], example.answers) if chunks is not None else [example.gold]
                cases += _baselines(prefix, size, sample, shape(example.question, gold), example)
    notes = _notes(grid, sources, regimes)
    if chunks is not None:
        notes.append(
            "litm-qa: chunks=paragraphs: each document is the first 1,000-character chunk LangChain's "
            "RecursiveCharacterTextSplitter cuts from its passage followed by SQuAD 2.0 dev paragraphs that hold "
            "none of the answers (two or three paragraphs, blank lines between them)."
        )
    return cases, notes


def _notes(grid: Grid, sources: Sources, regimes: list[str]) -> list[str]:
    notes: list[str] = []
    if "easy" in regimes and sources.qa_oracle and not sources.qa_positional:
        notes.append(
            "litm-qa: only the oracle file was given, so each question's distractors are other "
            "questions' gold passages that contain none of its answers (not the paper's retrieved ones)."
        )
    elif "easy" in regimes and not sources.qa_oracle and not sources.qa_positional:
        notes.append("litm-qa: generated fictional-fact QA (invented entities; no model knows the answers).")
    if "hard" in regimes:
        notes.append(
            "litm-qa, variant `hard`: generated fictional-fact questions (the `standard` ones when no QA file is "
            "given), each among passages about its own invented entity (its other facts, sentences on the "
            "question's subject that do not answer it) and near-misses (a neighbouring fact about the entity, the "
            "asked fact about similarly named ones); none holds the answer."
        )
    if sources.squad is not None and "squad" in regimes:
        room = ", ".join(f"{len(_squad_pool(sources.squad, grid.seed, n))} for {n} documents" for n in grid.sizes)
        notes.append(
            f"litm-qa, variant `hard-squad`: SQuAD 2.0 dev ({sources.squad.name}), an answerable question with its "
            "paragraph as the gold among other paragraphs of the same Wikipedia article that hold none of its "
            f"answers (normalised as the metric normalises); of {len(same_article_questions(sources.squad))} "
            f"questions, those with room: {room}."
        )
    return notes


def _examples(
    grid: Grid, sources: Sources, oracle: list[QAExample] | None, size: int, positions: list[int], sample: int
) -> Examples:
    """For one sample: the same question and distractors, the gold at each position."""
    rng = case_rng(grid.seed, INFO.name, size, sample)
    found: Examples = {}
    for position in positions:
        path = sources.positional_file(size, position)
        if path is not None:
            rows = _load(path)
            order = case_rng(grid.seed, INFO.name, "row").sample(range(len(rows)), len(rows))
            example = rows[order[sample % len(rows)]]
            found[position] = (example, place(example.gold, example.distractors, position))
    missing = [p for p in positions if p not in found]
    if not missing:
        return found
    if oracle:
        order = case_rng(grid.seed, INFO.name, "row").sample(range(len(oracle)), len(oracle))
        example = oracle[order[sample % len(oracle)]]
        distractors = distractors_from_other_questions(example, oracle, size - 1, rng)
    else:
        example, _ = _invented(grid.seed, size, sample)
        distractors = list(example.distractors)
    for position in missing:
        found[position] = (example, place(example.gold, distractors, position))
    return dict(sorted(found.items()))


def _invented(seed: int, size: int, sample: int) -> tuple[QAExample, Fact]:
    """The generated question of `standard`, its gold passage and its `size - 1` facts about other entities."""
    rng = case_rng(seed, INFO.name, size, sample)
    facts = invented_facts(rng, size)
    passages = [Passage(f.title, paragraph(rng, f, 3)) for f in facts]
    return QAExample(facts[0].question, (facts[0].answer,), passages[0], tuple(passages[1:])), facts[0]


def _hard(seed: int, size: int, sample: int) -> QAExample:
    """`standard`'s generated question and gold passage among passages about the same entity."""
    example, fact = _invented(seed, size, sample)
    distractors = same_entity_distractors(case_rng(seed, INFO.name, "hard", size, sample), fact, size - 1)
    return replace(example, distractors=tuple(distractors))


def _squad(seed: int, path: Path, size: int, sample: int) -> QAExample:
    pool = _squad_pool(path, seed, size)
    if not pool:
        raise ValueError(f"litm-qa: no question in {path.name} has {size - 1} other paragraphs without its answer")
    chosen = pool[sample % len(pool)]
    distractors = case_rng(seed, INFO.name, "squad", size, sample).sample(chosen.others, size - 1)
    return QAExample(chosen.question, chosen.answers, chosen.gold, tuple(distractors))


@functools.cache
def _squad_pool(path: Path, seed: int, size: int) -> tuple[SameArticleQuestion, ...]:
    """The questions with room for `size - 1` distractors, in the one order the seed gives, so that the sizes
    share their questions as far as room allows."""
    questions = same_article_questions(path)
    order = case_rng(seed, INFO.name, "squad").sample(range(len(questions)), len(questions))
    return tuple(questions[i] for i in order if len(questions[i].others) >= size - 1)


def _at_positions(example: QAExample, positions: list[int]) -> Examples:
    return {position: (example, place(example.gold, example.distractors, position)) for position in positions}


def _same_question(example: QAExample, standard: Examples) -> bool:
    """Whether `standard`'s baselines (built from its first example) are also `example`'s."""
    if not standard:
        return False
    first, _ = next(iter(standard.values()))
    return (first.question, first.answers, first.gold) == (example.question, example.answers, example.gold)


def _baselines(prefix: str, size: int, sample: int, oracle: Chat, example: QAExample) -> list[Case]:
    closed_book = Chat(None, closed_book_prompt(example.question))
    return [
        _case(f"{prefix}closed-book", size, None, sample, closed_book, example.answers, baseline=True),
        _case(f"{prefix}oracle", size, None, sample, oracle, example.answers, baseline=True),
    ]


def _case(
    variant: str,
    size: int,
    position: int | None,
    sample: int,
    chat: Chat,
    answers: tuple[str, ...],
    *,
    baseline: bool = False,
) -> Case:
    return Case(
        INFO.name,
        variant,
        size,
        position,
        sample,
        chat.user,
        answers,
        INFO.metric,
        MAX_TOKENS,
        strategies=("none",) if baseline else None,
        system=chat.system,
    )


TASK = Task(
    INFO,
    {
        "quick": Grid((10,), ("0%", "50%", "100%"), 1, options={REGIMES.name: QUICK_REGIMES}),
        "full": Grid((10, 20, 30), (), 100),
    },
    lambda grid, context: build(grid, context.sources),
    (PROMPT, REGIMES, CHUNKS),
)
