"""`multifact`: RULER's multi-key, multi-value, multi-query needles as FACT (Wang et al.) evaluates them.
`KxVyQz`: x keys hidden in the haystack, y values per key, z keys asked for at once; each needle is RULER's
"One of the special magic numbers for {key} is: {value}." at a random place in essay-like prose. The prompt is
RULER's (FACT's appendix B); the score is the share of the asked keys' values found in the answer.

The haystack is cut into paragraphs of about 250 tokens, each in a `<document>` element, so that the proxy's
strategies see documents where RULER has one block of text; the text the model reads is otherwise RULER's.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from contextlift.eval.cases import Case, Grid, TaskInfo, case_rng
from contextlift.eval.sources import Sources
from contextlift.eval.tasks.fiction import filler_text, invented_name
from contextlift.eval.tasks.registry import Option, Task
from contextlift.strategies import TiktokenTokenizer

INFO = TaskInfo(
    "multifact", "Multi-fact retrieval (FACT / RULER)", "context tokens", "needles", "value_recall", positional=False
)
PARAGRAPH_TOKENS = 250
_CONFIG = re.compile(r"^K(\d+)V(\d+)Q(\d+)$")
INTRO = (
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz "
    "you about the numbers afterwards."
)


@dataclass(frozen=True, slots=True)
class NeedleConfig:
    keys: int
    values: int
    queries: int

    @classmethod
    def parse(cls, text: str) -> NeedleConfig:
        match = _CONFIG.match(text.strip())
        if not match:
            raise ValueError(f"multifact: {text!r} is not KxVyQz, e.g. K1V4Q1")
        config = cls(int(match[1]), int(match[2]), int(match[3]))
        if min(config.keys, config.values, config.queries) < 1 or config.queries > config.keys:
            raise ValueError(f"multifact: {text!r} needs at least 1 of each and no more queries than keys")
        return config

    def __str__(self) -> str:
        return f"K{self.keys}V{self.values}Q{self.queries}"


def needle_configs(text: str) -> list[NeedleConfig]:
    """The `needles` option's value: comma-separated `KxVyQz`.

    Raises:
        ValueError: a part that is not one.
    """
    return [NeedleConfig.parse(c) for c in text.split(",")]


NEEDLES = Option("needles", "K1V4Q1", needle_configs)
"""`--option multifact.needles=K1V4Q1,...`: keys, values per key and keys queried, one variant each."""


def build(grid: Grid, sources: Sources) -> tuple[list[Case], list[str]]:
    del sources  # generated only: RULER's haystacks are built, not read
    configs = NEEDLES.read(grid)
    tokenizer = TiktokenTokenizer()
    cases = []
    for config in configs:
        for tokens in grid.sizes:
            for sample in range(grid.samples):
                rng = case_rng(grid.seed, INFO.name, config, tokens, sample)
                keys = _distinct_names(rng, config.keys)
                values = {k: [str(rng.randint(1_000_000, 9_999_999)) for _ in range(config.values)] for k in keys}
                needles = [f"One of the special magic numbers for {k} is: {v}." for k in keys for v in values[k]]
                asked = keys[: config.queries]
                prompt = _prompt(rng, needles, asked, tokens, tokenizer)
                gold = tuple(v for k in asked for v in values[k])
                cases.append(
                    Case(
                        INFO.name,
                        str(config),
                        tokens,
                        None,
                        sample,
                        prompt,
                        gold,
                        INFO.metric,
                        max_tokens=16 + 12 * len(gold),
                    )
                )
    return cases, []


def _distinct_names(rng: random.Random, count: int) -> list[str]:
    names: list[str] = []
    while len(names) < count:
        name = invented_name(rng).lower()
        if name not in names:
            names.append(name)
    return names


def _prompt(rng: random.Random, needles: list[str], asked: list[str], tokens: int, tokenizer: TiktokenTokenizer) -> str:
    sentences = filler_text(rng, max(tokens // 16, 1)).split(". ")
    sentences = [s.rstrip(".") + "." for s in sentences]
    for needle in needles:
        sentences.insert(rng.randint(0, len(sentences)), needle)
    paragraphs, current = [], ""
    for sentence in sentences:
        current = f"{current} {sentence}".strip()
        if tokenizer.count(current) >= PARAGRAPH_TOKENS:
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    context = "\n".join(f'<document index="{i}">{p}</document>' for i, p in enumerate(paragraphs, 1))
    query = ", ".join(asked[:-1]) + (" and " if len(asked) > 1 else "") + asked[-1]
    return (
        f"{INTRO}\n\n{context}\n\nWhat are all the special magic numbers for {query} mentioned in the provided "
        f"text? The special magic numbers for {query} mentioned in the provided text are"
    )


TASK = Task(
    INFO,
    {
        "quick": Grid((600,), (), 1, options={"needles": "K2V2Q1"}),
        "full": Grid((2000, 4000, 7000), (), 50, options={"needles": "K1V10Q1,K5V10Q1"}),
    },
    lambda grid, context: build(grid, context.sources),
    (NEEDLES,),
)
