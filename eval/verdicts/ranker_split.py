"""A ranked pipeline's lift, split by whether its ranker was right, and whether a signal the proxy has at request time
tells the two apart. Reads the rankings `eval.case_rankings` attached to the samples (`Sample.ranking`); a run
without them (no ranked pipeline, or a report written before they were kept) gives no rows.

- **The split**: per task x variant x ranked pipeline, the pairs where its ranker put a gold unit first (`right`)
  and the rest (`wrong`), each with the paired lift over `none`, wins and losses, the exact test after Holm's
  correction over the pipelines of the regime in that half, and the A/A floor of the re-asked cases in that half.
- **The signal**: per ranker, the margin by which its first unit leads (`ranker_margin`, as the proxy's policies read
  it) as a score for "the ranker is right": its AUC with Hanley and McNeil's 95% interval, and a threshold chosen on
  the cases of even sample number (the cut that best separates right from wrong: Youden's J) and checked on the odd
  ones. Beside it, lexical and minilm agreeing on the first unit. Per pipeline, the lift where the signal says go
  and where it says stay (the margin on the check half; agreement on every case).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextlift.eval.case_rankings import pipeline_ranker
from contextlift.eval.cases import REASKED, Sample
from contextlift.eval.verdicts.stats import Z95, PairedLift, holm, paired_lift, pairs_to_decide, wilson

BASELINE = "none"
AGREEMENT = ("lexical", "minilm")
"""The two rankers whose agreement on the first unit is the second signal: one by words, one by meaning."""
_NAMED = re.compile(r"\b(?:focused|quoted)(?:_paragraph|_chunk)?=(\d+)")
"""The unit a `focus` or `excerpt` step chose, first of those it names, as its header note says."""
ALL = "all"
"""The variant name of rows pooled over a task's variants: the proxy cannot tell the regimes apart in a request."""


def has_rankings(samples: Iterable[Sample]) -> bool:
    return any(s.ranking for s in samples)


def ranker_split(samples: Sequence[Sample], reasked: Sequence[Sample]) -> list[dict[str, Any]]:
    """The split rows (module docstring), per task x variant x pipeline x half, in the samples' order of pipelines."""
    rankings = _rankings(samples)
    rows = []
    for (task, variant), group in _by(samples, lambda s: (s.task, s.variant)).items():
        base = {s.case: s for s in group if s.strategy == BASELINE}
        again = [s for s in reasked if s.task == task and s.variant == variant]
        for strategy in dict.fromkeys(s.strategy for s in group):
            ranker = pipeline_ranker(strategy)
            if strategy == BASELINE or ranker is None:
                continue
            halves: dict[str, list[tuple[Sample, Sample]]] = {"right": [], "wrong": []}
            for treated in sorted((s for s in group if s.strategy == strategy), key=lambda s: s.case):
                half = _half(rankings.get(treated.case), ranker)
                once = base.get(treated.case)
                if half and once is not None and once.upstream == treated.upstream and not treated.error:
                    halves[half].append((treated, once))
            for half, pairs in halves.items():
                row: dict[str, Any] = {"task": task, "variant": variant, "strategy": strategy, "ranker": ranker}
                row["half"] = half
                row.update(_pairs_row(pairs))
                row.update(_floor(again, base, rankings, ranker, half))
                rows.append(row)
    _holm(rows, ("task", "variant", "half"))
    return rows


def ranker_signal(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Per task x variant (and pooled over the variants, `all`) x ranker: how well its margin, and two rankers'
    agreement, tell the questions where it is right from those where it is wrong.

    Counted once per question (`n`), on its case with the gold first: the same question with the gold elsewhere is
    the same documents in another order, which a ranker scores alike, so its positions are not further evidence."""
    rankings = _rankings(samples)
    rows = []
    for (task, variant), cases in _regimes(samples, rankings).items():
        rankers = sorted({r for case in cases.values() for r in case["rankers"]})
        questions = _one_per_question(cases)
        for ranker in rankers:
            read = [(key, case) for key, case in questions.items() if ranker in case["rankers"]]
            right = [case["rankers"][ranker]["gold_rank"] == 1 for _, case in read]
            margins = [case["rankers"][ranker]["margin"] for _, case in read]
            choose = [_sample_of(key) % 2 == 0 for key, _ in read]
            row: dict[str, Any] = {"task": task, "variant": variant, "ranker": ranker, "n": len(read)}
            row["right"] = sum(right)
            known = [(m, r) for m, r in zip(margins, right, strict=True) if m is not None]
            row["auc"], row["auc_ci95"] = auc([m for m, r in known if r], [m for m, r in known if not r])
            chosen = [(m, r) for (m, r), c in zip(zip(margins, right, strict=True), choose, strict=True) if c]
            threshold = youden_threshold([(m, r) for m, r in chosen if m is not None])
            row["threshold"] = threshold
            checked = [(m, r) for (m, r), c in zip(zip(margins, right, strict=True), choose, strict=True) if not c]
            row["check"] = _above_below(checked, threshold)
            if all(a in case["rankers"] for _, case in read for a in AGREEMENT):
                agree = [_agree(case) for _, case in read]
                row["agree"] = {
                    "n_agree": sum(agree),
                    "right_agree": sum(r for r, a in zip(right, agree, strict=True) if a),
                    "n_disagree": len(agree) - sum(agree),
                    "right_disagree": sum(r for r, a in zip(right, agree, strict=True) if not a),
                }
            rows.append(row)
    return rows


def signal_lift(samples: Sequence[Sample], signal: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task x variant (and `all`) x ranked pipeline: its lift where its ranker's margin is at or above the
    threshold chosen on the even half and where it is below, on the odd half; and where lexical and minilm agree on
    the first unit and where they do not, on every case."""
    rankings = _rankings(samples)
    thresholds = {(r["task"], r["variant"], r["ranker"]): r["threshold"] for r in signal}
    rows = []
    for (task, variant), cases in _regimes(samples, rankings).items():
        group = [s for s in samples if s.task == task and (variant == ALL or s.variant == variant) and s.case in cases]
        base = {s.case: s for s in group if s.strategy == BASELINE}
        for strategy in dict.fromkeys(s.strategy for s in group):
            ranker = pipeline_ranker(strategy)
            if strategy == BASELINE or ranker is None:
                continue
            threshold = thresholds.get((task, variant, ranker))
            parts: dict[str, list[tuple[Sample, Sample]]] = defaultdict(list)
            for treated in sorted((s for s in group if s.strategy == strategy), key=lambda s: s.case):
                once, case = base.get(treated.case), cases[treated.case]
                if once is None or once.upstream != treated.upstream or treated.error:
                    continue
                reading = case["rankers"].get(ranker)
                if reading and threshold is not None and reading["margin"] is not None and _sample_of(treated) % 2:
                    parts["margin above" if reading["margin"] >= threshold else "margin below"].append((treated, once))
                if all(a in case["rankers"] for a in AGREEMENT):
                    parts["agree" if _agree(case) else "disagree"].append((treated, once))
            for part in ("margin above", "margin below", "agree", "disagree"):
                row = {"task": task, "variant": variant, "strategy": strategy, "ranker": ranker, "part": part}
                rows.append({**row, "threshold": threshold, **_pairs_row(parts[part])})
    return rows


def ranker_check(samples: Sequence[Sample]) -> dict[str, int]:
    """How often the unit the eval's ranking puts first is the one the proxy named or quoted (`focused=N`,
    `quoted=N` in its `X-Context-Strategy`), over the answers that say which: the join rests on the two agreeing."""
    compared = matched = 0
    for s in samples:
        ranker = pipeline_ranker(s.strategy)
        said = _NAMED.search(s.applied or "")
        reading = (s.ranking or {}).get("rankers", {}).get(ranker or "")
        if said and reading is not None:
            compared += 1
            matched += int(said[1]) == reading["first"] + 1
    return {"compared": compared, "matched": matched}


def auc(positives: Sequence[float], negatives: Sequence[float]) -> tuple[float, list[float]]:
    """The chance that a positive scores above a negative (ties count half), with Hanley and McNeil's (1982) 95%
    interval, widened to Wilson's on the smaller side's count where that is wider: Hanley and McNeil's shrinks to a
    point at 0 and 1, which a handful of questions reach by chance. NaN where either side is empty."""
    n1, n0 = len(positives), len(negatives)
    if not n1 or not n0:
        return math.nan, [math.nan, math.nan]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in positives for q in negatives)
    a = wins / (n1 * n0)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    variance = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0)
    half = Z95 * math.sqrt(max(0.0, variance))
    low, high = wilson(a, min(n1, n0))
    return a, [max(0.0, min(a - half, low)), min(1.0, max(a + half, high))]


def youden_threshold(scored: Sequence[tuple[float, bool]]) -> float | None:
    """The margin at or above which "right" is called, chosen to maximise sensitivity + specificity - 1 (Youden's J)
    over cuts halfway between neighbouring observed margins (the lowest such cut on a tie), so that a case checked
    later is not judged by where one chosen case happened to lie; None where the cases are all right or all wrong."""
    positives = sum(1 for _, r in scored if r)
    negatives = len(scored) - positives
    if not positives or not negatives:
        return None
    values = sorted({m for m, _ in scored})
    cuts = [values[0]] + [(low + high) / 2 for low, high in itertools.pairwise(values)]
    best: tuple[float, float] | None = None
    for t in cuts:
        caught = sum(1 for m, r in scored if r and m >= t) / positives
        misled = sum(1 for m, r in scored if not r and m >= t) / negatives
        if best is None or caught - misled > best[0]:
            best = (caught - misled, t)
    return best[1] if best else None


def _above_below(scored: Sequence[tuple[float | None, bool]], threshold: float | None) -> dict[str, Any]:
    known = [(m, r) for m, r in scored if m is not None and threshold is not None]  # no threshold: nothing to check
    above = [r for m, r in known if threshold is not None and m >= threshold]
    below = [r for m, r in known if threshold is not None and m < threshold]
    return {"n_above": len(above), "right_above": sum(above), "n_below": len(below), "right_below": sum(below)}


def _pairs_row(pairs: Sequence[tuple[Sample, Sample]]) -> dict[str, Any]:
    if not pairs:
        return {"n": 0, "value": None, "ci95": [None, None], "wins": 0, "losses": 0, "p": None, "to_decide": None}
    lift: PairedLift = paired_lift([t.score for t, _ in pairs], [b.score for _, b in pairs])
    discordant = (lift.wins + lift.losses) / lift.n
    return {
        "n": lift.n,
        "value": lift.value,
        "ci95": [lift.low, lift.high],
        "wins": lift.wins,
        "losses": lift.losses,
        "p": lift.p,
        "baseline": sum(b.score for _, b in pairs) / len(pairs),
        "to_decide": pairs_to_decide(lift.value, discordant),
    }


def _floor(
    again: Sequence[Sample], base: Mapping[str, Sample], rankings: Mapping[str, Any], ranker: str, half: str
) -> dict[str, Any]:
    """The A/A floor on the re-asked cases of this half: the share whose score changed; None where none fell in it."""
    pairs = [(s, base[s.case]) for s in again if s.case in base and _half(rankings.get(s.case), ranker) == half]
    pairs = [(s, b) for s, b in pairs if s.upstream == b.upstream and not s.error and not b.error]
    changed = sum(1 for s, b in pairs if s.score != b.score)
    return {"reasked": len(pairs), "floor": changed / len(pairs) if pairs else None}


def _holm(rows: list[dict[str, Any]], family_by: tuple[str, ...]) -> None:
    families: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["p"] is not None:
            families[tuple(row[f] for f in family_by)].append(row)
    for row in rows:
        row["p_holm"], row["family"] = None, 0
    for family in families.values():
        for row, adjusted in zip(family, holm([r["p"] for r in family]), strict=True):
            row["p_holm"], row["family"] = adjusted, len(family)
    for row in rows:
        if row["p_holm"] is not None and row["value"]:
            row["to_decide"] = pairs_to_decide(row["value"], (row["wins"] + row["losses"]) / row["n"], row["family"])


def _half(ranking: Mapping[str, Any] | None, ranker: str) -> str | None:
    reading = (ranking or {}).get("rankers", {}).get(ranker)
    if reading is None:
        return None
    return "right" if reading["gold_rank"] == 1 else "wrong"


def _agree(case: Mapping[str, Any]) -> bool:
    first, second = AGREEMENT
    return bool(case["rankers"][first]["first"] == case["rankers"][second]["first"])


def _rankings(samples: Iterable[Sample]) -> dict[str, Mapping[str, Any]]:
    return {s.case: s.ranking for s in samples if s.ranking and s.strategy != REASKED}


def _regimes(
    samples: Sequence[Sample], rankings: Mapping[str, Mapping[str, Any]]
) -> dict[tuple[str, str], dict[str, Mapping[str, Any]]]:
    """The ranked cases per task x variant, and per task over all its variants (`all`) where it has several."""
    out: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = defaultdict(dict)
    variants: dict[str, set[str]] = defaultdict(set)
    for s in samples:
        if s.case in rankings:
            out[(s.task, s.variant)][s.case] = rankings[s.case]
            variants[s.task].add(s.variant)
    for task, names in variants.items():
        if len(names) > 1:
            out[(task, ALL)] = {k: v for (t, _), cases in list(out.items()) if t == task for k, v in cases.items()}
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1] == ALL, kv[0][1])))


def _one_per_question(cases: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The case of each question (task, variant, size, sample) with its gold at the lowest position."""
    chosen: dict[tuple[str, ...], tuple[int, str]] = {}
    for key in cases:
        task, variant, size, position, sample = key.split("|")
        question = (task, variant, size, sample)
        at = int(position) if position.isdigit() else -1
        if question not in chosen or at < chosen[question][0]:
            chosen[question] = (at, key)
    return {key: cases[key] for _, key in sorted(chosen.values(), key=lambda c: c[1])}


def _sample_of(item: Sample | str) -> int:
    """The case's sample number (its key's last field): even ones choose a threshold, odd ones check it."""
    key = item.case if isinstance(item, Sample) else item
    return int(key.rsplit("|", 1)[1])


def _by(samples: Iterable[Sample], key: Any) -> dict[Any, list[Sample]]:
    groups: dict[Any, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[key(s)].append(s)
    return groups


__all__ = ["auc", "has_rankings", "ranker_check", "ranker_signal", "ranker_split", "signal_lift", "youden_threshold"]
