"""`length`: context length alone hurts (Du et al. 2025). A short problem split into evidence and question,
with distraction tokens (whitespace, or essay-like prose) between them at increasing token counts (tiktoken),
and the variant with the evidence right before the question (the distraction before it). Problems: Variable
Summation (50 integer variables, the sum of 3) and GSM8K (the `test.jsonl` in `--data`, else generated
arithmetic word problems); exact numeric match on the last number of the answer.

The paper's prompt (its Figure 8) is kept, with the evidence and each distraction chunk of up to 500 tokens
wrapped in `<document>` elements: without them no proxy could tell evidence from question, and `recite` (the
paper's own mitigation) would have nothing to recite.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable
from pathlib import Path

from contextlift.eval.cases import Case, Grid, TaskInfo, case_rng, resolve_positions
from contextlift.eval.sources import Sources
from contextlift.eval.tasks.fiction import filler_text, invented_name
from contextlift.eval.tasks.registry import Option, Task
from contextlift.strategies import TiktokenTokenizer

INFO = TaskInfo(
    "length",
    "Context length alone (Du et al.)",
    "distraction tokens",
    "evidence depth %",
    "numeric_match",
    positional=False,
)
MAX_TOKENS = 256
"""Room for the step-by-step reasoning the paper's prompt asks for."""
CHUNK_TOKENS = 500
DISTRACTIONS = ("whitespace", "essay")
PROBLEM_KINDS = ("varsum", "gsm8k")
_WHITESPACE_UNIT = " \n"
"""Two of these are one cl100k token, where a run of plain spaces packs dozens into one."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _names_from(choices: tuple[str, ...], what: str) -> Callable[[str], list[str]]:
    def names(text: str) -> list[str]:
        values = text.split(",")
        unknown = sorted(set(values) - set(choices))
        if unknown:
            raise ValueError(f"length: unknown {what} {', '.join(unknown)}; choose {', '.join(choices)}")
        return values

    return names


DISTRACTION = Option("distraction", "whitespace", _names_from(DISTRACTIONS, "distraction"))
"""`--option length.distraction=whitespace,essay`: what fills the context, one variant each."""
PROBLEMS = Option("problems", "varsum,gsm8k", _names_from(PROBLEM_KINDS, "problems"))
"""`--option length.problems=varsum,gsm8k`: Variable Summation, GSM8K, or both, one variant each."""
ANSWER_TOKENS = Option("max_tokens", str(MAX_TOKENS), int)
"""`--option length.max_tokens=N`: the tokens each answer may take."""


def build(grid: Grid, sources: Sources) -> tuple[list[Case], list[str]]:
    distractions = DISTRACTION.read(grid)
    problems = PROBLEMS.read(grid)
    depths = resolve_positions(grid.positions, 101, indexed=False) if grid.positions else [0, 100]
    max_tokens = ANSWER_TOKENS.read(grid)
    tokenizer = TiktokenTokenizer()
    notes = [] if sources.gsm8k or "gsm8k" not in problems else ["length: GSM8K-style problems generated."]
    cases = []
    for problem in problems:
        for sample in range(grid.samples):
            evidence, question, answer = _problem(problem, grid.seed, sample, sources.gsm8k)
            for distraction in distractions:
                for tokens in grid.sizes:
                    chunks = _distraction(
                        distraction, tokens, case_rng(grid.seed, INFO.name, sample, tokens), tokenizer
                    )
                    for depth in depths if tokens else depths[:1]:
                        cases.append(
                            Case(
                                INFO.name,
                                f"{problem}, {distraction}",
                                tokens,
                                depth,
                                sample,
                                prompt(evidence, chunks, question, evidence_last=depth >= 50),
                                (answer,),
                                INFO.metric,
                                max_tokens,
                            )
                        )
    return cases, notes


def prompt(evidence: str, chunks: list[str], question: str, *, evidence_last: bool) -> str:
    """Figure 8's sections: problem description, others (the distraction), question, answer."""
    documents = [evidence, *chunks] if not evidence_last else [*chunks, evidence]
    elements = [f'<document index="{i}">{text}</document>' for i, text in enumerate(documents, 1)]
    evidence_part = f"# Problem Description\n{elements[0 if not evidence_last else -1]}\n"
    others = "".join(f"{e}\n" for e in (elements[1:] if not evidence_last else elements[:-1]))
    others_part = f"# Others\n{others}" if chunks else ""
    body = evidence_part + others_part if not evidence_last else others_part + evidence_part
    return f"{body}# Question\n{question}\n# Answer\nLet's think step by step."


def variable_summation(rng: random.Random, variables: int = 50, summed: int = 3) -> tuple[str, str, str]:
    values = [rng.randint(1, 99) for _ in range(variables)]
    chosen = sorted(rng.sample(range(variables), summed))
    evidence = "\n".join(f"x{i + 1} = {v}" for i, v in enumerate(values))
    question = f"What is the value of {' + '.join(f'x{i + 1}' for i in chosen)}?"
    return evidence, question, str(sum(values[i] for i in chosen))


def word_problem(rng: random.Random) -> tuple[str, str, str]:
    """A GSM8K-like two-step problem with invented names."""
    name, item = invented_name(rng), rng.choice(["apples", "books", "coins", "stamps", "marbles", "shells"])
    start, bought, per_box, given = rng.randint(5, 40), rng.randint(2, 6), rng.randint(2, 9), rng.randint(1, 5)
    evidence = (
        f"{name} has {start} {item}. {name} buys {bought} boxes of {item}, and each box holds {per_box} "
        f"{item}. Then {name} gives {given} {item} to a friend."
    )
    return evidence, f"How many {item} does {name} have now?", str(start + bought * per_box - given)


@functools.cache
def load_gsm8k(path: Path) -> list[tuple[str, str, str]]:
    """GSM8K's (evidence, question, answer): the question's last sentence is the question, the rest evidence."""
    problems = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        sentences = _SENTENCE_END.split(row["question"].strip())
        answer = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        problems.append((" ".join(sentences[:-1]), sentences[-1], answer))
    return problems


def _problem(problem: str, seed: int, sample: int, gsm8k: Path | None) -> tuple[str, str, str]:
    rng = case_rng(seed, INFO.name, problem, sample)
    if problem == "varsum":
        return variable_summation(rng)
    if gsm8k is None:
        return word_problem(rng)
    rows = load_gsm8k(gsm8k)
    return rows[case_rng(seed, INFO.name, "rows").sample(range(len(rows)), len(rows))[sample % len(rows)]]


def _distraction(kind: str, tokens: int, rng: random.Random, tokenizer: TiktokenTokenizer) -> list[str]:
    """`tokens` cl100k tokens of distraction, in chunks of at most CHUNK_TOKENS."""
    chunks = []
    left = tokens
    while left > 0:
        size = min(CHUNK_TOKENS, left)
        chunks.append(_whitespace(size, tokenizer) if kind == "whitespace" else _essay(size, rng, tokenizer))
        left -= size
    return chunks


def _whitespace(tokens: int, tokenizer: TiktokenTokenizer) -> str:
    text = _WHITESPACE_UNIT * (2 * tokens)
    while tokenizer.count(text) > tokens and len(text) > len(_WHITESPACE_UNIT):
        text = text[: -len(_WHITESPACE_UNIT)]
    return text


def _essay(tokens: int, rng: random.Random, tokenizer: TiktokenTokenizer) -> str:
    sentences = filler_text(rng, tokens // 8 + 4).split(". ")
    text = ""
    for sentence in sentences:
        candidate = f"{text}{sentence.rstrip('.')}. "
        if tokenizer.count(candidate) > tokens:
            break
        text = candidate
    return text.strip()


TASK = Task(
    INFO,
    {
        # quick: the evidence first only (the paper's main setting), for the quick profile's 15 minutes (plan.PROFILES):
        # the evidence-last case, 250 tokens of whitespace that the embedded model counts double, cost the most.
        "quick": Grid((0, 250), ("0",), 1, options={"problems": "varsum", "max_tokens": "64"}),
        "full": Grid(
            (0, 1000, 2000, 4000, 6000), (), 50, options={"distraction": "whitespace,essay", "problems": "varsum,gsm8k"}
        ),
    },
    lambda grid, context: build(grid, context.sources),
    (DISTRACTION, PROBLEMS, ANSWER_TOKENS),
)
