"""What a benchmark case is, and the grid it is drawn from: sizes, gold positions and samples per task."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

REASKED = "none (re-asked)"
"""The A/A arm: `none` asked again, on a sample of the cases, after every other request of the run. How often its
answers differ from `none`'s is the upstream's own noise, the floor a lift must clear (eval.verdicts.results)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One prompt with its gold answers, sent once per strategy.

    `size` and `position` mean what the task says (`TaskInfo`): documents and gold index for Lost in the
    Middle, a token budget and a depth in percent for the haystack tasks. `position` is None for a baseline
    or a case whose gold has no single place.
    """

    task: str
    variant: str
    size: int
    position: int | None
    sample: int
    prompt: str
    gold: tuple[str, ...]
    metric: str
    max_tokens: int = 64
    temperature: float = 0.0
    strategies: tuple[str, ...] | None = None
    """The strategies this case runs with; None means every requested one (baselines run with `none` only)."""
    system: str | None = None
    """A system message sent before `prompt` (the user message), as an app's framework sends one; None for the
    papers' single user message."""
    body: Mapping[str, Any] | None = None
    """A captured request sent as it was (`--replay`): its messages and fields, the model and streaming aside;
    `prompt` then only names it (for its hash)."""

    @property
    def key(self) -> str:
        return f"{self.task}|{self.variant}|{self.size}|{'-' if self.position is None else self.position}|{self.sample}"

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat as sent: the system message, if any, then the prompt as the user's."""
        system = [{"role": "system", "content": self.system}] if self.system is not None else []
        return [*system, {"role": "user", "content": self.prompt}]

    @property
    def prompt_hash(self) -> str:
        # A prompt alone hashes as it always has, so earlier runs' samples keep their hashes.
        text = self.prompt if self.system is None else f"{self.system}\0{self.prompt}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Sample:
    """One case's answer under one strategy, scored: a line of `samples.jsonl`, which holds these fields in this
    order."""

    task: str
    variant: str
    size: int
    position: int | None
    sample: int
    strategy: str
    case: str
    """The case's key (`Case.key`): a strategy's sample pairs with `none`'s on it."""
    prompt_hash: str
    metric: str
    gold: tuple[str, ...]
    answer: str
    score: float
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    upstream_calls: int | None = None
    applied: str | None = None
    """`X-Context-Strategy` as the proxy answered it: the steps applied and their notes (`fallback=...`)."""
    status: int | None = None
    error: str | None = None
    cached: bool = False
    upstream: str | None = None
    """The fingerprint of the upstream that answered (`eval.identity`); None in a file written before it was kept."""
    run: str | None = None
    """The run that asked; a cached answer keeps the run that first asked."""
    ranking: Mapping[str, Any] | None = None
    """Where each ranker puts the case's gold and by what margin it leads (`eval.case_rankings`), on a case of a run
    with a ranked pipeline; None otherwise, and in a file written before rankings were kept."""

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Sample:
        """A sample from its JSON object; fields an older file lacks take their defaults.

        Raises:
            KeyError: a field without a default is missing.
        """
        names = {f.name for f in fields(cls)}
        given = {k: v for k, v in record.items() if k in names}
        given["gold"] = tuple(given.get("gold") or ())
        given.setdefault("prompt_hash", "")
        given.setdefault("metric", "")
        given.setdefault("answer", "")
        return cls(**given)

    def to_json(self) -> dict[str, Any]:
        """Its JSON object; `upstream`, `run` and `ranking` only where known, so that a file from before they were
        kept reads and writes back as it was."""
        return {
            f.name: list(self.gold) if f.name == "gold" else getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("upstream", "run", "ranking") or getattr(self, f.name) is not None
        }


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """How a task's grid reads in the report."""

    name: str
    title: str
    size_unit: str
    position_unit: str
    metric: str
    positional: bool = True
    """Whether `position` is a gold index (True) or a depth in percent (False)."""


@dataclass(frozen=True, slots=True)
class Grid:
    """The cases to build for one task: every size x position, `samples` times."""

    sizes: tuple[int, ...]
    positions: tuple[str, ...]
    """As given: an index (`4`) or a share of the way through (`50%`); resolved per size by `resolve_positions`."""
    samples: int
    seed: int = 0
    options: dict[str, str] = field(default_factory=dict)


def resolve_positions(positions: Sequence[str], slots: int, *, indexed: bool) -> list[int]:
    """The gold indices (or depths in percent) for `slots` places, in order, without repeats.

    An index past the last slot is dropped; `p%` is `floor(p / 100 * (slots - 1))`, so `0%,50%,100%` of
    10 documents is 0, 4, 9 and of 20 is 0, 9, 19, the paper's first, middle and last.
    """
    resolved: list[int] = []
    for text in positions:
        if text.endswith("%"):
            share = float(text[:-1]) / 100
            value = int(share * (slots - 1)) if indexed else round(share * 100)
        else:
            value = int(text)
        if 0 <= value < (slots if indexed else 101) and value not in resolved:
            resolved.append(value)
    return resolved


def case_rng(seed: int, *parts: object) -> random.Random:
    """A generator for one case's content: the same seed and parts give the same case on any machine."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))
