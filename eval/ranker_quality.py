"""`contextlift eval-rankers`: how well each ranker finds the gold document, without a model. The litm-qa cases of
the chosen regimes are detected as the proxy detects them, ranked by each ranker, and scored by the gold's rank:
gold first (the share of cases where it ranks first, with Wilson's 95% interval) and the mean reciprocal rank.

Besides the distractor regimes (easy, hard, squad), a `retriever` regime puts the hard cases' documents in the
order a retriever would send them: the gold at rank r with probability proportional to RETRIEVER_DECAY ** r, the
distractors in their order around it. It is the regime where the client's own order (`client`) carries signal.

`regime_cases` and `case_rankings` are the cases and rankings alone: scripts/filter_margins.py judges `filter`'s
cuts on them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import shlex
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from contextlift.eval.cases import Case
from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.sources import Sources, find_sources
from contextlift.eval.verdicts.stats import wilson
from contextlift.strategies import ChatRequest, parse_request
from contextlift.strategies.embedder import Embedder
from contextlift.strategies.rankers import RankerSet, Ranking, published_rankers, rank_documents

RANKERS = ("client", "lexical", "minilm", "fusion")
RETRIEVER_DECAY = 0.6
"""The gold's rank in the `retriever` regime falls off as 0.6 ** rank: first in 40% of cases, in the top three
in 78%, so the client's order is a signal without being the answer (a dense retriever's top-1 accuracy on NQ is
about 45%, its top-5 about 70%: Karpukhin et al. 2020, table 2)."""
RETRIEVER = "retriever"
VARIANTS = {"easy": "standard", "squad": "hard-squad"}
"""The regimes reported under another variant name: the names `contextlift eval` gives their cases."""


def retriever_ordered(cases: Sequence[Case], seed: int) -> list[Case]:
    """The cases with the gold moved to a rank drawn as a retriever would place it (variant `retriever`)."""
    rng = random.Random(seed)
    ordered = []
    for case in cases:
        if case.position is None:
            continue
        weights = [RETRIEVER_DECAY**r for r in range(case.size)]
        rank = rng.choices(range(case.size), weights)[0]
        ordered.append(replace(case, variant=RETRIEVER, position=rank, prompt=_moved(case, rank)))
    return ordered


def _moved(case: Case, rank: int) -> str:
    """The case's prompt with its gold document line moved from `case.position` to `rank`."""
    lines = case.prompt.split("\n")
    slots = [i for i, line in enumerate(lines) if line.startswith("Document [")]
    # `Document [i](Title: t) text`: what follows the number moves; the numbers stay in order.
    bodies = [lines[i].split("](", 1)[1] for i in slots]
    bodies.insert(rank, bodies.pop(case.position or 0))
    for number, (line, body) in enumerate(zip(slots, bodies, strict=True), start=1):
        lines[line] = f"Document [{number}]({body}"
    return "\n".join(lines)


async def case_rankings(
    cases: Sequence[Case], rankers: Sequence[str], embedder: Embedder | None
) -> AsyncIterator[tuple[Case, Ranking]]:
    """Each case with a gold document, ranked by each ranker as the proxy ranks it: its documents detected as the
    proxy detects them (a case whose documents detection does not find is left out: no ranking to score)."""
    available = RankerSet(published_rankers(), embedder=embedder)
    for case in cases:
        if case.position is None:
            continue
        chat: ChatRequest = parse_request({"model": "m", "messages": case.messages})
        if len(chat.documents) != case.size:
            continue
        for name in rankers:
            yield case, await rank_documents(chat.question, chat.documents, available, name)


async def gold_ranks(cases: Sequence[Case], rankers: Sequence[str], embedder: Embedder | None) -> list[dict[str, Any]]:
    """Per case and ranker: the gold's rank (1 is first), from documents detected as the proxy detects them."""
    return [
        {
            "variant": case.variant,
            "size": case.size,
            "ranker": ranking.ranker,
            "rank": ranking.order().index(case.position or 0) + 1,
            "fallback": ranking.fallback,
        }
        async for case, ranking in case_rankings(cases, rankers, embedder)
    ]


def summarise(ranks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant x size x ranker: gold first (share and 95% interval), mean reciprocal rank, n."""
    groups: dict[tuple[str, int, str], list[int]] = defaultdict(list)
    for row in ranks:
        groups[(row["variant"], row["size"], row["ranker"])].append(row["rank"])
    out = []
    for (variant, size, ranker), found in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        first = sum(1 for r in found if r == 1)
        low, high = wilson(first / len(found), len(found))
        out.append(
            {
                "variant": variant,
                "size": size,
                "ranker": ranker,
                "gold_first": first,
                "n": len(found),
                "gold_first_ci95": [low, high],
                "mrr": sum(1 / r for r in found) / len(found),
            }
        )
    return out


def render(rows: Sequence[dict[str, Any]], note: str) -> str:
    lines = [
        "# Rankers: where each puts the gold document",
        "",
        note,
        "",
        "| regime | documents | ranker | gold first | 95% CI | MRR | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["gold_first_ci95"]
        lines.append(
            f"| {r['variant']} | {r['size']} | {r['ranker']} | {r['gold_first']}/{r['n']} | [{low:.2f}, {high:.2f}] "
            f"| {r['mrr']:.3f} | {r['n']} |"
        )
    return "\n".join(lines) + "\n"


def run(
    out: Path,
    sizes: Sequence[int],
    samples: int,
    regimes: Sequence[str],
    rankers: Sequence[str],
    data: Path | None,
    seed: int,
    embedder: Embedder | None = None,
) -> list[dict[str, Any]]:
    """Build the cases, rank them with each ranker, write `rankers.md` and `rankers.json` under `out`.

    Raises:
        ValueError: an unknown ranker or regime, or data a regime needs and does not have.
    """
    unknown = set(rankers) - set(published_rankers())
    if unknown:
        raise ValueError(f"unknown ranker(s) {', '.join(sorted(unknown))}; choose from {', '.join(RANKERS)}")
    sources = find_sources(data)
    chosen, notes = regime_cases(sizes, samples, regimes, sources, seed)
    rows = summarise(
        asyncio.run(gold_ranks(chosen, rankers, embedder if embedder is not None else cpu_embedder(rankers)))
    )
    out.mkdir(parents=True, exist_ok=True)
    command = command_line(sizes, samples, regimes, rankers, data, seed)
    preamble = _preamble(command, samples, seed, regimes, _data_read(sources, sizes, regimes, data), notes)
    (out / "rankers.md").write_text(render(rows, preamble), encoding="utf-8")
    (out / "rankers.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return rows


def regime_cases(
    sizes: Sequence[int],
    samples: int,
    regimes: Sequence[str],
    sources: Sources,
    seed: int,
    options: Sequence[str] = (),
) -> tuple[list[Case], list[str]]:
    """The litm-qa cases of the regimes (each question with the gold first, in the middle and last; `retriever`:
    one case per hard question, the gold at a drawn rank) and the task's notes on them. `options` are further
    litm-qa options (`litm-qa.chunks=paragraphs`).

    Raises:
        ValueError: an unknown regime, or data a regime needs and does not have.
    """
    built = [r for r in regimes if r != RETRIEVER]
    if RETRIEVER in regimes and "hard" not in built:
        built.append("hard")
    plan = make_plan(
        "full",
        ["litm-qa"],
        ["none"],
        [",".join(map(str, sizes))],
        ["0%,50%,100%"],
        [str(samples)],
        [f"litm-qa.distractors={','.join(built)}", *options],
        seed,
    )
    cases, notes = build_cases(plan, sources)
    wanted = {VARIANTS.get(r, r) for r in regimes}
    # The gold first, in the middle and last: the client's order is no signal there (gold first in a third).
    chosen = [c for c in cases if c.position is not None and c.variant in wanted]
    if RETRIEVER in regimes:
        once = [c for c in cases if c.position == 0 and c.variant == "hard"]  # one case per question
        chosen += retriever_ordered(once, seed)
    return chosen, notes


def cpu_embedder(rankers: Sequence[str]) -> Embedder | None:
    """MiniLM for the rankers that embed (none otherwise), on the CPU even where there is a GPU: there MiniLM runs
    in fp16 on other kernels, whose cosines need not round a near-tie as the committed tables' fp32 ones did."""
    if not {"minilm", "fusion"} & set(rankers):
        return None
    from contextlift.strategies import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(device="cpu")


def command_line(
    sizes: Sequence[int], samples: int, regimes: Sequence[str], rankers: Sequence[str], data: Path | None, seed: int
) -> str:
    """The `eval-rankers` command that asks for exactly this run, every option spelled out and `--out DIR`."""
    words = ["contextlift", "eval-rankers", "--out", "DIR", "--regimes", ",".join(regimes)]
    words += ["--sizes", ",".join(map(str, sizes)), "--samples", str(samples), "--rankers", ",".join(rankers)]
    words += ["--seed", str(seed)] + (["--data", str(data)] if data is not None else [])
    return shlex.join(words)


def _data_read(sources: Sources, sizes: Sequence[int], regimes: Sequence[str], data: Path | None) -> list[str]:
    """Each file the regimes' cases come from, by its place under `--data` and its sha256."""
    files: list[Path] = []
    if "easy" in regimes:  # `hard` is generated whatever the folder holds
        files += [path for size, _, path in sources.qa_positional if size in sizes]
        files += [sources.qa_oracle] if sources.qa_oracle else []
    if "squad" in regimes and sources.squad:
        files.append(sources.squad)
    return [
        f"`{path.relative_to(data).as_posix() if data else path}` "
        f"(sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})"
        for path in files
    ]


def _preamble(
    command: str,
    samples: int,
    seed: int,
    regimes: Sequence[str],
    read: Sequence[str],
    notes: Sequence[str],
) -> str:
    """What the table is, the command that wrote it, the data it read, and what another machine may change."""
    named = ", ".join(f"{r} (reported as `{VARIANTS[r]}`)" if r in VARIANTS else r for r in regimes)
    return "\n".join(
        [
            f"litm-qa (the paper's prompt), seed {seed}, {samples} questions per regime and size, each with the gold "
            f"first, in the middle and last (so `client` ranks it first in a third of the cases), except "
            f"`retriever`: one case per hard question, the gold's rank drawn as {RETRIEVER_DECAY} ** rank. "
            f"Regimes: {named}.",
            "",
            "Written by this command, run from the project's root; on the code this page was committed with it "
            "gives this page and `rankers.json` back byte for byte:",
            "",
            "```bash",
            command,
            "```",
            "",
            f"Data read: {', '.join(read)}." if read else "Data read: none (every case generated).",
            "",
            "The cases, as the task describes them:",
            "",
            *(f"- {note}" for note in notes),
            "",
            "What can differ elsewhere: the `--data` path on the command line (the figures depend on the files "
            "alone, named by their hashes above); without the NQ-Open file, or without `--data`, `easy` is generated "
            "fictional-fact QA: other questions, other figures. `minilm` and `fusion` rank by MiniLM's cosines, "
            "computed on the CPU in fp32 on every machine; another torch build or processor could still round a "
            "near-tie the other way.",
        ]
    )
