"""Everything a strategy author imports, in one module: the base classes and their capability flags, declared
parameters, what a step may use while it runs (`StepContext`, `Services`), the outcome types, and the helpers
the built-in executors share. A strategy is a subclass of `Transform` or `Executor` published under the
entry-point group `contextlift.strategies`; the built-ins are published exactly that way (pyproject.toml). The
README's "Write a strategy" section has a whole one in 20 lines.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

import anyio

from contextlift.strategies.embedder import Embedder, embed_off_loop
from contextlift.strategies.evidence import answer_text, intermediate_body, sum_usage, with_prior_usage, with_usage
from contextlift.strategies.lexical_similarity import NAME as LEXICAL_NAME
from contextlift.strategies.lexical_similarity import LexicalSimilarity
from contextlift.strategies.rankers import gate
from contextlift.strategies.rankers.base import (
    RANKER_PARAM_DESCRIPTION,
    Ranker,
    RankerFailure,
    RankerSet,
    Ranking,
    published_rankers,
    rank_documents,
)
from contextlift.strategies.request import ChatRequest, Document
from contextlift.strategies.tokens import TiktokenTokenizer, Tokenizer
from contextlift.strategies.upstream import Completion, CompletionStream, StrategyOutcome, Upstream, UpstreamFailure

__all__ = [
    "FORMAT_PARAM",
    "GATE_PARAM",
    "RANKER_PARAM",
    "AppliedStep",
    "ChatRequest",
    "Completion",
    "CompletionStream",
    "Document",
    "Embedder",
    "Executor",
    "Param",
    "ParamValue",
    "Params",
    "Ranker",
    "RankerFailure",
    "RankerSet",
    "Ranking",
    "Role",
    "Services",
    "StepContext",
    "Strategy",
    "StrategyOutcome",
    "Tokenizer",
    "Transform",
    "Upstream",
    "UpstreamFailure",
    "answer_text",
    "embed_off_loop",
    "intermediate_body",
    "rank",
    "send_once",
    "sum_usage",
    "text_fits",
    "with_prior_usage",
    "with_usage",
]

ParamValue = int | float | str
Params = Mapping[str, ParamValue]


class Role(StrEnum):
    """What a strategy does in a pipeline."""

    TRANSFORM = "transform"
    """Changes the request; any number of them run in order."""
    EXECUTOR = "executor"
    """Decides how the upstream is called; at most one, last."""


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter a strategy accepts in its step, e.g. `k` in `medoid; k=5`."""

    name: str
    kind: type[int] | type[float] | type[str]
    default: ParamValue | None
    description: str
    minimum: float | None = None
    maximum: float | None = None
    """The built-in cap; operators may set another in settings, and a request can only go below it. A default
    above the cap in force is lowered to it."""
    choices: tuple[str, ...] = ()

    def parse(self, text: str, cap: float | None) -> ParamValue:
        """The typed value of `text`, checked against choices, minimum and `cap`.

        Raises:
            ValueError: the value is malformed or out of range.
        """
        if self.kind is str:
            if self.choices and text not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            return text
        try:
            value: int | float = int(text) if self.kind is int else float(text)
        except ValueError:
            raise ValueError(f"must be {'an integer' if self.kind is int else 'a number'}, got {text!r}") from None
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {_number(self.minimum)}, got {text}")
        if cap is not None and value > cap:
            raise ValueError(f"must be at most {_number(cap)} (the configured cap), got {text}")
        return value

    def default_within(self, cap: float | None) -> ParamValue | None:
        """The default, lowered to `cap` when it is above it: an operator's cap binds what a request gets
        without asking as much as what it asks for.

        Raises:
            ValueError: the cap is below the minimum, so no value is allowed at all.
        """
        default = self.default
        if cap is None or default is None or isinstance(default, str) or default <= cap:
            return default
        lowered = math.floor(cap) if self.kind is int else cap
        if self.minimum is not None and lowered < self.minimum:
            raise ValueError(f"has a configured cap of {_number(cap)}, below its minimum of {_number(self.minimum)}")
        return lowered


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


FORMAT_PARAM = Param(
    "format",
    str,
    None,
    "the shape to read the request's documents in (a built-in shape, or a format the operator declared); "
    "unset: detected",
)
"""Accepted by every strategy that needs documents: a request that knows its prompt's shape names it."""

RANKER_PARAM = Param("ranker", str, None, RANKER_PARAM_DESCRIPTION)
"""Accepted by every strategy that ranks documents (`ranks = True`); the proxy checks the name against the
rankers it offers when it resolves the selection, so an unknown one is refused before any upstream call."""

GATE_PARAM = Param(
    "gate",
    float,
    None,
    "act only where the ranker's margin (its first document's lead over the second, as a share of its lead over the "
    "last) is at least this; below, the step does nothing (skipped=margin); unset: the ranker's measured gate "
    "(docs/rankers.md); 0: always act",
    minimum=0.0,
    maximum=1.0,
)
"""Accepted by every strategy that ranks documents, with `ranker`: the one gate (`rankers.gate`) they all stand
behind."""


class Strategy(ABC):
    """Base of every strategy. Subclass `Transform` or `Executor`, not this."""

    name: ClassVar[str]
    role: ClassVar[Role]
    params: ClassVar[tuple[Param, ...]] = ()
    needs_documents: ClassVar[bool] = True
    """Whether the strategy does anything for a request without detected documents."""
    reads_unmovable: ClassVar[bool] = False
    """Whether it also runs where the documents could be read but not moved (`ChatRequest.unmovable`, a context
    declined as `ambiguous-chunks`): only a step that adds text and moves nothing may say so."""
    streams_directly: ClassVar[bool] = True
    """Whether its last upstream call can stream straight through to the client."""
    needs_embedder: ClassVar[bool] = False
    """Whether it uses `Services.embedder` (which then must be loaded before it runs)."""
    moves: ClassVar[bool] = False
    """Whether it moves or drops documents (or sends them in another order): it then runs only where the request
    proves the documents' boundaries; where they are a guess (`ChatRequest.unmovable`), the step that
    `Services.unproven_fallback` names runs in its place, or none."""
    ranks: ClassVar[bool] = False
    """Whether it orders documents through `rank`: it then accepts the `ranker` parameter, and needs the
    embedder only when its ranker does."""
    prompt_copies: ClassVar[int] = 1
    """How many times over its calls send the prompt, at most (`repeat`: 2): what a cost estimate multiplies by."""
    passes_through: ClassVar[bool] = False
    """Whether selecting it selects nothing (`none`): it stands alone, and the request goes upstream untouched."""
    answers_n: ClassVar[bool] = True
    """Whether it gives the `n` choices a client asks for. An executor that makes one answer sets False, and a
    request with `n` > 1 is then refused with a 400 naming `n` rather than answered with fewer choices."""
    keeps_documents: ClassVar[bool] = True
    """Whether the request it returns still holds the documents apart from the prompt's text. `repeat` writes them
    into the text (`ChatRequest.written`): a later step that needs documents would find none, so a pipeline that
    puts one after it is refused."""

    def max_upstream_calls(self, params: Params) -> int:
        """The most upstream calls this step can make (retries aside); 0 for a transform that calls none."""
        return 0

    def upstream_calls(self, params: Params, prompt_tokens: int) -> int:
        """The upstream calls this step makes for a prompt of `prompt_tokens` (retries aside), for a cost or time
        estimate: `max_upstream_calls` unless the count follows the prompt's size (`chain`: a call per chunk)."""
        return self.max_upstream_calls(params)

    def runs_on(self, request: ChatRequest) -> bool:
        """Whether a step of this strategy does anything for `request`: it needs no documents, or the request holds
        some (or, for a step that reads them, documents it may not move). A pipeline passes over it otherwise."""
        readable = self.reads_unmovable and request.unmovable is not None
        return not self.needs_documents or bool(request.documents) or readable

    def keeps_order(self, params: Params) -> bool:
        """Whether its calls send the documents in the order it was handed them: `medoid` sends each call its own
        permutation, which the response then says (`X-Context-Order: permuted`)."""
        return True


class Transform(Strategy):
    """A strategy that rewrites the request before it is sent."""

    role: ClassVar[Role] = Role.TRANSFORM

    @abstractmethod
    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        """The rewritten request."""


class Executor(Strategy):
    """A strategy that decides how the upstream is called and what the client gets back."""

    role: ClassVar[Role] = Role.EXECUTOR

    def max_upstream_calls(self, params: Params) -> int:
        return 1

    @abstractmethod
    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        """Call the upstream through `context.upstream` and return what the client gets."""


@dataclass(frozen=True, slots=True)
class Services:
    """The heavy helpers strategies share, loaded once at start-up by whoever builds the app."""

    embedder: Embedder | None = None
    tokenizer: Tokenizer = field(default_factory=TiktokenTokenizer)
    seed: int | None = None
    """Default seed for strategies that draw random permutations; None: a fresh draw per request."""
    observe_step: Callable[[str, float], None] | None = None
    """Told each step's strategy name and duration in seconds (the proxy feeds its metrics with it)."""
    rankers: RankerSet | None = None
    """The rankers steps may name; None: the built-ins, with `embedder` for `minilm`."""
    unproven_fallback: tuple[Transform, Params] | None = None
    """What runs in place of a step that moves documents (`moves`) where their boundaries are a guess: a step
    that only adds (`focus`, `excerpt`) with its parameters; None: the step is declined, the body sent as it came."""

    def ranker_set(self) -> RankerSet:
        return self.rankers if self.rankers is not None else RankerSet(published_rankers(), embedder=self.embedder)

    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise RuntimeError("this strategy needs an embedder, and none was loaded")
        return self.embedder

    def similarity(self) -> tuple[Embedder, str | None]:
        """What compares answers: the embedder, else (the embeddings extra not installed) word counts, with the
        name a step must report so that the change of method is never silent (`similarity=lexical`)."""
        if self.embedder is not None:
            return self.embedder, None
        return LexicalSimilarity(), LEXICAL_NAME


@dataclass(slots=True)
class AppliedStep:
    """A step that ran, as the `X-Context-Strategy` response header reports it: the step as it was asked
    (`medoid; k=5`), then the facts it noted while running (`agreement=4/5`, `fallback=no-facts`)."""

    name: str
    label: str
    notes: list[str] = field(default_factory=list)
    explicit: tuple[str, ...] = ()
    """The parameters the request set (the others took their defaults)."""
    ranking: Ranking | None = None
    """The ranking the step ranked by, when it ranked (`rank`)."""
    ranked: tuple[Document, ...] = ()
    """The documents that ranking scored, in the order the step received them."""

    def render(self) -> str:
        return "; ".join([self.label, *self.notes])


@dataclass(slots=True)
class StepContext:
    """What a step may use while it runs, and where it reports what it actually did."""

    upstream: Upstream
    services: Services = field(default_factory=Services)
    applied: list[AppliedStep] = field(default_factory=list)
    """The steps that ran, in order."""
    prior_calls: list[Completion] = field(default_factory=list)
    """The calls transforms made before the request goes on (`pick`'s): the response's usage counts them."""

    def note(self, fact: str) -> None:
        """Add a fact (`fallback=empty-recitation`, `failed=2`) to what the step now running reports."""
        if self.applied:
            self.applied[-1].notes.append(fact)

    def fall_back(self, reason: str) -> None:
        """Mark the step now running as having fallen back to a plain call, and why."""
        self.note(f"fallback={reason}")


def text_fits(request: ChatRequest, context: StepContext) -> bool:
    """Whether a line of text may be added beside the request's documents (`request.block` set): not in a JSON
    list or a run of messages, and not without a question. Where it may not, the step notes why (`skipped=...`)."""
    assert request.block is not None
    if not request.block.takes_text:
        context.note("skipped=format")  # a JSON list or a run of messages has no place for a line of text
        return False
    if not request.question:
        context.note("skipped=no-question")
        return False
    return True


async def rank(request: ChatRequest, params: Params, context: StepContext) -> Ranking:
    """The request's documents ranked by the step's `ranker` (else the default), past the ranker's gate. Never fails
    the request: a ranker that cannot rank leaves the client's order, and the step reports
    `ranker-fallback=NAME:REASON`; a ranker no gate was measured for says `gate=unmeasured`.

    Raises:
        BelowGate: the ranker's margin is under its gate (`gate=`, else the ranker's measured one): the step must not
            act on the ranking. The pipeline catches it, keeps the request as the step received it, and the step
            reports `skipped=margin; margin=0.070`.
    """
    name = params.get("ranker")
    ranking = await rank_documents(
        request.question, request.documents, context.services.ranker_set(), str(name) if name else None
    )
    if ranking.fallback is not None:
        context.note(f"ranker-fallback={ranking.ranker}:{ranking.fallback}")
    if context.applied:
        context.applied[-1].ranking = ranking
        context.applied[-1].ranked = tuple(request.documents)
    asked = params.get("gate")
    gated = gate.check(ranking, float(asked) if isinstance(asked, int | float) else None, context.services.ranker_set())
    if not gated:
        context.note("gate=unmeasured")
    return ranking


def note_unmeasured(
    context: StepContext, ranking: Ranking, parameters: tuple[str, ...], measured_with: frozenset[str]
) -> None:
    """Say `unmeasured-with=RANKER` where the running step left every one of `parameters` (those that make its
    cut) at a default that was measured with other rankers only (a margin tuned on cosine similarities, read on
    BM25's rescaled scores): a drop can then be explained from the header. A cut the request set is its own."""
    step = context.applied[-1] if context.applied else None
    if step is None or set(step.explicit).intersection(parameters) or ranking.fallback is not None:
        return
    if ranking.ranker not in measured_with:
        context.note(f"unmeasured-with={ranking.ranker}")


async def send_once(request: ChatRequest, upstream: Upstream) -> StrategyOutcome:
    """Send the request as rendered, once, streamed if the client asked for a stream."""
    # Rendering documents is work in proportion to them, so not on the event loop; without any it is a copy.
    body = await anyio.to_thread.run_sync(request.render) if request.documents else request.render()
    if request.stream:
        return await upstream.stream(body)
    return await upstream.complete(body)
