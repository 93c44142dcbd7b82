"""`medoid`: permutation medoid voting (SWiM, Dsouza et al., algorithm 3). k concurrent calls, each with the
documents in an independent random permutation; the answers are embedded and the one with the largest
summed cosine similarity to the others is returned. Without the embeddings extra the answers are compared by
their words (`contextlift.strategies.lexical_similarity`) and the step says so: `similarity=lexical`."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any, ClassVar

import anyio

from contextlift.strategies.plugin import (
    ChatRequest,
    Completion,
    Embedder,
    Executor,
    Param,
    Params,
    StepContext,
    StrategyOutcome,
    UpstreamFailure,
    answer_text,
    embed_off_loop,
    sum_usage,
    with_usage,
)

_ABSENCE = re.compile(
    r"\b(?:no (?:relevant )?information|not (?:\w+ )?(?:mentioned|found|provided|given|stated|present|available|"
    r"specified|included)|(?:does|do) not (?:mention|contain|say|provide|specify)|cannot (?:be )?(?:determined|"
    r"found|answered)|can't (?:be )?(?:determined|found|answered)|i (?:do not|don't) know|unknown)\b",
    re.IGNORECASE,
)
_NOT_PER_CALL = ("stream", "stream_options", "n")
AGREEING_SIMILARITY = 0.75
"""Cosine similarity to the medoid's answer from which another answer counts as agreeing with it. all-MiniLM-L6-v2
on answers of the embedded model's kind: one answer reworded at a similar length 0.77 to 0.97 ("Paris" / "It is
Paris." 0.86, "The capital is Paris." 0.78); two answers in the same sentence frame with different names 0.66;
two different bare names 0.18 to 0.50. A bare name against a whole sentence that holds it falls to 0.54 and
counts as disagreeing: the figure is a lower bound."""


def says_absent(answer: str) -> bool:
    """Whether an answer says the information is not in the context (SWiM's absence filtering)."""
    return bool(_ABSENCE.search(answer)) or not answer.strip()


class Medoid(Executor):
    """Votes among k answers to independently permuted contexts."""

    name: ClassVar[str] = "medoid"
    needs_embedder: ClassVar[bool] = True
    """Waits for MiniLM where it is installed; without it, compares answers by their words (`similarity=lexical`)."""
    streams_directly: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (
        Param("k", int, 5, "number of concurrent calls", minimum=1, maximum=9),
        Param("seed", int, None, "seed of the permutations, for reproducible runs", minimum=0, maximum=2**63 - 1),
        Param("permute", str, "on", "off keeps the documents' order, so only sampling varies (SWiM's control run)",
              choices=("on", "off")),
        Param("temperature", float, 0.7, "sampling temperature of the voting calls, in place of the client's "
              "(SWiM sec. 4.3 votes over answers sampled at 0.7, its default; 0 leaves only the permutations "
              "to vary)", minimum=0.0, maximum=2.0),
    )  # fmt: skip

    def max_upstream_calls(self, params: Params) -> int:
        return int(params["k"])

    def keeps_order(self, params: Params) -> bool:
        return params["permute"] == "off"

    async def execute(self, request: ChatRequest, params: Params, context: StepContext) -> StrategyOutcome:
        seed = params.get("seed", context.services.seed)
        rng: random.Random = random.Random(seed) if seed is not None else random.SystemRandom()
        # k renderings of every document: CPU work in proportion to the request, not for the event loop.
        bodies = await anyio.to_thread.run_sync(_permuted_bodies, request, params, rng)
        results = await _ask(bodies, context)
        refused = [i for i, r in enumerate(results) if isinstance(r, UpstreamFailure) and "seed" in r.refused_fields]
        if refused:
            # An upstream that takes no `seed` (docs/strategies.md): those calls again without it, sampled unseeded.
            context.note("seed=refused")
            again = await _ask([{k: v for k, v in bodies[i].items() if k != "seed"} for i in refused], context)
            for index, result in zip(refused, again, strict=True):
                results[index] = result
        answered = [r for r in results if isinstance(r, Completion)]
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:
            if not isinstance(failure, UpstreamFailure):
                raise failure
        if not answered:
            raise failures[0]
        if failures:
            context.note(f"failed={len(failures)}")
        similarity, named = context.services.similarity()
        if named is not None:
            context.note(f"similarity={named}")
        ranking = await self._vote(answered, similarity, context)
        context.note(f"agreement={await _agreement(answered, ranking[0], similarity)}/{len(answered)}")
        wanted = _choices_wanted(request)
        if wanted == 1:
            chosen = ranking[0]
            others = [c for i, c in enumerate(answered) if i != chosen]
            return with_usage(answered[chosen], sum_usage(others))
        # The client asked for `n` choices: the n most central answers, the medoid first.
        picked = ranking[:wanted]
        if len(picked) < wanted:
            context.note(f"choices={len(picked)}")
        others = [c for i, c in enumerate(answered) if i != picked[0]]
        return with_usage(_with_choices(answered[picked[0]], [answered[i] for i in picked]), sum_usage(others))

    async def _vote(self, answered: list[Completion], similarity: Embedder, context: StepContext) -> list[int]:
        """Indices of the answers, most central first; answers saying the information is absent come last."""
        answers = [answer_text(c) for c in answered]
        candidates = [i for i, a in enumerate(answers) if not says_absent(a)] or list(range(len(answers)))
        if len(candidates) < len(answers):
            context.note(f"absent={len(answers) - len(candidates)}")
        rest = [i for i in range(len(answers)) if i not in candidates]
        if len(candidates) <= 2:
            return candidates + rest  # with one or two answers every one is a medoid: keep the first
        vectors = await embed_off_loop(similarity, [answers[i] for i in candidates])
        totals = (vectors @ vectors.T).sum(axis=1)
        order = sorted(range(len(candidates)), key=lambda j: (-float(totals[j]), j))
        return [candidates[j] for j in order] + rest


async def _ask(bodies: list[dict[str, Any]], context: StepContext) -> list[Completion | BaseException]:
    """Each body's answer, or its failure, the calls made at once."""
    return list(await asyncio.gather(*(context.upstream.complete(b) for b in bodies), return_exceptions=True))


async def _agreement(answered: list[Completion], medoid: int, similarity: Embedder) -> int:
    """How many answers (the medoid's own included) say what the medoid says: its cluster's size."""
    answers = [answer_text(c) for c in answered]
    if len(answers) == 1:
        return 1
    vectors = await embed_off_loop(similarity, answers)
    closeness = vectors @ vectors[medoid]
    return sum(1 for i, value in enumerate(closeness) if i == medoid or float(value) >= AGREEING_SIMILARITY)


def _choices_wanted(request: ChatRequest) -> int:
    n = request.body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1


def _with_choices(first: Completion, picked: list[Completion]) -> Completion:
    choices = []
    for index, completion in enumerate(picked):
        found = completion.body.get("choices") or [{}]
        choice = dict(found[0]) if isinstance(found[0], dict) else {}
        choices.append({**choice, "index": index})
    return Completion({**first.body, "choices": choices}, first.headers)


def _permuted_bodies(request: ChatRequest, params: Params, rng: random.Random) -> list[dict[str, Any]]:
    """The k voting calls' bodies, each naming its own sampling seed drawn from `rng`: k calls on one prompt
    (`permute=off`) still sample k answers from an upstream that seeds an unseeded request alike (the embedded
    model does), and a seeded medoid samples the same answers each time. An upstream that refuses the field is
    asked again without it (`seed=refused`)."""
    documents = list(request.documents)
    bodies = []
    for _ in range(int(params["k"])):
        order = rng.sample(documents, len(documents)) if params["permute"] == "on" else documents
        permuted = request.with_documents(order).render()
        body = {k: v for k, v in permuted.items() if k not in _NOT_PER_CALL}
        body["temperature"] = params["temperature"]
        body["seed"] = rng.randrange(2**31)
        bodies.append(body)
    return bodies
