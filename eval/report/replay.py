"""The replay's own report section (`eval --replay`): how stable each strategy's answer is under another order of
the documents, and how often it agrees with the answer the client was served."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from contextlift.eval.cases import Sample
from contextlift.eval.metrics import normalize_answer
from contextlift.eval.tasks.replay import INFO


def stability_section(samples: Sequence[Sample]) -> list[str]:
    """Per strategy: how often its answer survives the permutation of the documents (its own two answers,
    normalised, equal), and how often it agrees with the served answer as captured."""
    pairs: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)
    agreement: dict[str, list[float]] = defaultdict(list)
    for sample in samples:
        if sample.task != INFO.name or sample.variant not in ("as-captured", "permuted") or sample.error:
            continue
        pairs[(sample.strategy, sample.sample)][sample.variant] = normalize_answer(sample.answer)
        if sample.variant == "as-captured":
            agreement[sample.strategy].append(sample.score)
    stable: dict[str, list[float]] = defaultdict(list)
    for (strategy, _), answers in pairs.items():
        if len(answers) == 2:
            stable[strategy].append(float(answers["as-captured"] == answers["permuted"]))
    if not stable:
        return []
    from contextlift.eval.verdicts.stats import estimate

    lines = [
        "## replay: stability and agreement",
        "",
        "stable: the strategy gave the same answer (normalised) with the documents in another order; agrees: its "
        "answer to the request as captured is the one the client was served",
        "",
        "| strategy | stable | 95% CI | agrees with served | 95% CI | n |",
        "|---|---|---|---|---|---|",
    ]
    for strategy in sorted(stable):
        s, a = estimate(stable[strategy]), estimate(agreement[strategy])
        lines.append(
            f"| {strategy} | {s.value:.3f} | [{s.low:.3f}, {s.high:.3f}] | {a.value:.3f} | [{a.low:.3f}, {a.high:.3f}] "
            f"| {s.n} |"
        )
    return [*lines, ""]
