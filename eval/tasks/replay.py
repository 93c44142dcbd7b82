"""`contextlift eval --replay CAPTURED.jsonl`: the strategies on the requests your traffic really sent, captured
by shadow evaluation (`CONTEXTLIFT_SHADOW_CAPTURE=true`). Three kinds of case per captured request with at least
two documents:

- `as-captured`: the request as it was sent, scored by whether the answer is the one the client was served
  (normalised exact match): agreement;
- `permuted`: the same request with its documents in another order (a fixed permutation per request that moves
  the first document), scored
  the same way; the report's stability table compares each strategy's two answers directly;
- `positional`: SWiM's test built from the request's own documents: a question-answer pair generated from one of
  them with SWiM's task-generation prompt (kept only if the answer occurs in it), that document placed first,
  in the middle and last among the request's other documents, in Lost in the Middle's prompt, scored against the
  generated answer. This is the positional benchmark on your own traffic;
- `probe`: the positional probe shadow evaluation runs (`shadow_probes`, strategies.probes): a needle with made-up
  names and a value found nowhere in the request written into one of its documents, that document first, in the
  middle and last, the question replaced by the probe's, all in the request's own prompt shape (the body is sent
  as the app sent it, so detection finds the documents as it did live); scored by whether the answer holds the
  value. Unlike `positional`, it needs nothing of the model but the answer.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from contextlift.eval.cases import Case, TaskInfo
from contextlift.eval.metrics import AGREEMENT_METRIC
from contextlift.eval.sinks import read_sink
from contextlift.eval.tasks.litm import Passage, place, qa_prompt
from contextlift.eval.tasks.registry import Ask
from contextlift.eval.tasks.swim import generate_items
from contextlift.strategies import DocumentLimitError, parse_request
from contextlift.strategies.probes import PROBE_MAX_TOKENS, make_probe, place_probe

INFO = TaskInfo(
    "replay",
    "Your captured requests, replayed",
    "documents",
    "gold document index",
    "same_answer (as-captured, permuted); best_subspan_em (positional, probe: the needle's value)",
)
DEPTHS = (0, 50, 100)
MAX_TOKENS = 256
"""For a captured request that set none: room for a chat answer."""


def build(path: Path, ask: Ask, seed: int = 0, limit: int = 200) -> tuple[list[Case], list[str]]:
    """The replay's cases from the captured records of a shadow sink (and its rotated files), at most `limit`
    requests; notes for the report on what was skipped.

    Raises:
        ValueError: the file holds no captured request.
    """
    read = read_sink(path)
    records = [r for r in read.records if isinstance(r.get("captured"), dict)]
    if not records:
        raise ValueError(
            f"{path}: no captured requests (set CONTEXTLIFT_SHADOW_CAPTURE=true to capture them); "
            f"{read.skipped} malformed lines skipped"
        )
    cases: list[Case] = []
    skipped = malformed = generated = probed = 0
    for index, record in enumerate(records[:limit]):
        body, served = record["captured"].get("body"), record["captured"].get("served")
        if not isinstance(body, dict) or not isinstance(served, str):
            malformed += 1
            continue
        try:
            found = parse_request(body)
            tokens = _max_tokens(body)
        except (DocumentLimitError, ValueError, KeyError, TypeError, RecursionError):
            # One record a client shaped oddly (`max_tokens: {"n": 1}`) is counted, never the end of the replay.
            malformed += 1
            continue
        if len(found.documents) < 2:
            skipped += 1
            continue
        name = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        size = len(found.documents)
        order = list(range(size))
        random.Random(f"{seed}:{name}").shuffle(order)
        if order[0] == 0:
            # The first place is where models read best: a permutation that leaves it alone tests too little.
            order = order[1:] + order[:1]
        try:
            permuted = found.with_documents([found.documents[i] for i in order]).render()
        except (ValueError, KeyError, TypeError):
            malformed += 1
            continue
        for variant, sent in (("as-captured", body), ("permuted", permuted)):
            cases.append(Case(INFO.name, variant, size, None, index, f"{variant}:{name}", (served,), AGREEMENT_METRIC,
                              tokens, body=sent))  # fmt: skip
        probe = make_probe(found, int(name, 16) ^ seed)
        if probe is not None:
            probed += 1
            for placed in place_probe(found, probe):
                cases.append(Case(INFO.name, "probe", size, placed.index, index, f"probe:{name}:{placed.position}",
                                  (probe.value,), "best_subspan_em", PROBE_MAX_TOKENS,
                                  body=placed.request.render()))  # fmt: skip
        passages = [
            Passage(d.title or f"Document {i + 1}", " ".join(d.text.split())) for i, d in enumerate(found.documents)
        ]
        items = generate_items(passages[:3], ask, 1)
        if not items:
            continue
        generated += 1
        item = items[0]
        others = [p for p in passages if p is not item.document]
        for depth in DEPTHS:
            position = round(depth / 100 * len(others))
            prompt = qa_prompt(item.question, place(item.document, others, position))
            cases.append(Case(INFO.name, "positional", size, position, index, prompt, item.answers,
                              "best_subspan_em", 64))  # fmt: skip
    notes = [
        f"replay: {len(records[:limit])} captured requests from {path.name}; {skipped} skipped (fewer than two "
        f"documents found); {malformed + read.skipped} malformed records skipped ({read.skipped} lines that are "
        f"not records, {malformed} captured requests that cannot be replayed); {generated} gave a generated "
        f"question for the positional test; {probed} took a positional probe"
    ]
    return cases, notes


def _max_tokens(body: dict[str, object]) -> int:
    """The captured request's `max_tokens`, or `MAX_TOKENS` where it set none.

    Raises:
        ValueError: a value that is not a positive whole number (a client's `{"n": 1}`, `"64"`, `true`).
    """
    value = body.get("max_tokens")
    if value is None:
        return MAX_TOKENS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tokens {value!r:.40} is not a positive integer")
    return value
