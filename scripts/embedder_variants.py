"""Is there a cheaper in-process embedder that ranks as all-MiniLM-L6-v2 in fp32 does? (issue "Rankers", item 3)

Variants of the packaged model, each against sentence-transformers on torch in fp32 (what the proxy runs on a CPU):

- documents cut to their first 128 or 64 word pieces (`max_seq_length`, 256 in the model);
- int8 dynamic quantisation of the linear layers with per-channel weight scales, all six transformer layers or
  all but the first N (kept in fp32);
- a static embedding distilled from the packaged model with model2vec (no download: it reads the local folder).

Quality, on the litm-qa cases `contextlift eval-rankers` builds (10 documents, 30 questions x gold first, middle
and last, easy and hard distractors): Spearman's rho of each case's ten question-document similarities against
fp32's (min and median over the 180 cases) and how often the gold ranks first. Cost: thread CPU time of one cold
embedding of a question and 20 documents (batches of 8, as the proxy runs on a CPU, one torch thread), every
variant measured in each round in turn, median over the rounds, with its ratio to fp32 in the same run.

Needs, in the project's venv (model2vec is not a dependency of the project):

    .venv/bin/pip install model2vec skeletoken   # what model2vec's distil needs

(`model2vec[distill]` pinned transformers 5.3 and tokenizers 0.22 over the venv's 5.24 and 0.23; installed as
above, with the venv's versions kept, distilling works and `pip check` is clean.)
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python scripts/embedder_variants.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextlift.eval.plan import build_cases, make_plan  # noqa: E402
from contextlift.eval.sources import find_sources  # noqa: E402
from contextlift.strategies import parse_request  # noqa: E402
from contextlift.strategies.embedder import CPU_BATCH, bundled_model_dir  # noqa: E402
from contextlift.strategies.rankers.minilm import embedding_text  # noqa: E402

Embed = Callable[[Sequence[str]], np.ndarray]
TIMED_DOCUMENTS = 20


def _cases(regimes: str, data: Path | None) -> list[tuple[str, str, list[str], int]]:
    """(regime, question, document texts, gold index) for each litm-qa case of 10 documents in `regimes`."""
    plan = make_plan(
        "full", ["litm-qa"], ["none"], ["10"], ["0%,50%,100%"], ["30"], [f"litm-qa.distractors={regimes}"], 0
    )
    cases, _ = build_cases(plan, find_sources(data))
    out = []
    for case in cases:
        if case.position is None:
            continue
        chat = parse_request({"model": "m", "messages": case.messages})
        if len(chat.documents) != case.size:
            continue
        regime = {"standard": "easy", "hard-squad": "squad"}.get(case.variant, case.variant)
        out.append((regime, chat.question, [embedding_text(d) for d in chat.documents], case.position))
    return out


def _sentence_transformer(max_seq_length: int | None = None) -> Any:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model


def _encoder(model: Any) -> Embed:
    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(
            model.encode(list(texts), batch_size=CPU_BATCH, normalize_embeddings=True, show_progress_bar=False)
        )

    return embed


def _int8(fp32_layers: int) -> Any:
    """The model with its linear layers in int8 (per-channel weight scales), the first `fp32_layers` left in fp32."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    model = _sentence_transformer()
    bert = model[0].auto_model
    spec: dict[Any, Any] = {}
    for name, module in bert.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        parts = name.split(".")
        if parts[:2] == ["encoder", "layer"] and int(parts[2]) < fp32_layers:
            continue
        spec[name] = per_channel_dynamic_qconfig
    quantize_dynamic(bert, spec, dtype=torch.qint8, inplace=True)  # type: ignore[no-untyped-call]
    return model


def _static(path: Path) -> Embed:
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(str(path))

    def embed(texts: Sequence[str]) -> np.ndarray:
        vectors: np.ndarray = np.asarray(model.encode(list(texts)), dtype=np.float32)
        unit: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return unit

    return embed


def _distil(path: Path) -> float:
    """Distil the packaged model into a static embedding at `path` (once); the seconds it took, 0 if it existed."""
    if (path / "model.safetensors").exists():
        return 0.0
    from model2vec.distill import distill

    started = time.monotonic()
    distill(model_name=str(bundled_model_dir()), pca_dims=256, device="cpu").save_pretrained(str(path))
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--static", type=Path, default=Path("/tmp/contextlift-m2v-minilm"))
    parser.add_argument("--skip-static", action="store_true")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="holds SQuAD 2.0 dev")
    parser.add_argument("--regimes", default="easy,hard,squad", help="litm-qa distractor regimes (squad needs data)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    variants: dict[str, Embed] = {
        "fp32 (today)": _encoder(_sentence_transformer()),
        "fp32, first 128 pieces": _encoder(_sentence_transformer(128)),
        "fp32, first 64 pieces": _encoder(_sentence_transformer(64)),
        "int8 per-channel, all 6 layers": _encoder(_int8(0)),
        "int8 per-channel, layer 1 fp32": _encoder(_int8(1)),
        "int8 per-channel, layers 1-2 fp32": _encoder(_int8(2)),
        "int8 per-channel, layers 1-3 fp32": _encoder(_int8(3)),
    }
    if not args.skip_static:
        seconds = _distil(args.static)
        if seconds:
            print(f"distilled the static embedding in {seconds:.0f} s")
        variants["model2vec static (distilled, 256 dims)"] = _static(args.static)

    cases = _cases(args.regimes, args.data if args.data.is_dir() else None)
    regimes = sorted({c[0] for c in cases})
    print(f"{len(cases)} cases: " + ", ".join(f"{r} {sum(c[0] == r for c in cases)}" for r in regimes))
    scores: dict[str, list[np.ndarray]] = {}
    for name, embed in variants.items():
        memo: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(t for _, q, docs, _ in cases for t in (q, *docs)))
        for text, vector in zip(unique, embed(unique), strict=True):
            memo[text] = vector
        scores[name] = [np.array([memo[d] @ memo[q] for d in docs]) for _, q, docs, _ in cases]

    # Timing: a question and 20 distinct documents of a regime, embedded cold by each variant in turn, per round.
    tokenizer = _sentence_transformer().tokenizer
    batches = {}
    for regime in ("hard", "squad"):
        documents = list(dict.fromkeys(d for r, _, docs, _ in cases if r == regime for d in docs))[:TIMED_DOCUMENTS]
        if len(documents) == TIMED_DOCUMENTS:
            batches[regime] = [next(q for r, q, _, _ in cases if r == regime), *documents]
    times: dict[tuple[str, str], list[float]] = {(b, name): [] for b in batches for name in variants}
    for timed in batches.values():
        for embed in variants.values():
            embed(timed)  # warm-up
    for _ in range(args.rounds):
        for batch, timed in batches.items():
            for name, embed in variants.items():
                started = time.thread_time()
                embed(timed)
                times[batch, name].append((time.thread_time() - started) * 1000)

    print(f"\n{args.rounds} rounds, one torch thread; timed batches (a question and {TIMED_DOCUMENTS} documents):")
    for batch, timed in batches.items():
        words = [len(d.split()) for d in timed[1:]]
        pieces = [len(tokenizer(d)["input_ids"]) for d in timed[1:]]
        print(
            f"- {batch}: {min(words)}-{max(words)} words (median {statistics.median(words):.0f}), "
            f"{min(pieces)}-{max(pieces)} word pieces (median {statistics.median(pieces):.0f})"
        )
    quality = [r for r in regimes if r != "squad"]
    print(
        "\n| variant | "
        + " | ".join(f"CPU ms {b} (ratio)" for b in batches)
        + f" | Spearman min / median ({'+'.join(quality)}) | "
        + ("Spearman min / median (squad) | " if "squad" in regimes else "")
        + " | ".join(f"gold first {r}" for r in regimes)
        + " |"
    )
    print("|---|" + "---|" * (len(batches) + 1 + ("squad" in regimes) + len(regimes)))
    for name in variants:
        rhos: dict[str, list[float]] = {r: [] for r in regimes}
        gold = dict.fromkeys(regimes, 0)
        for (regime, _, _, position), ours, theirs in zip(cases, scores["fp32 (today)"], scores[name], strict=True):
            rhos[regime].append(float(spearmanr(ours, theirs).statistic))
            gold[regime] += int(np.argmax(theirs)) == position
        cells = []
        for batch in batches:
            ratios = [t / r for t, r in zip(times[batch, name], times[batch, "fp32 (today)"], strict=True)]
            cells.append(f"{statistics.median(times[batch, name]):.0f} ({statistics.median(ratios):.2f})")
        main_rhos = [rho for r in quality for rho in rhos[r]]
        cells.append(f"{min(main_rhos):.3f} / {statistics.median(main_rhos):.3f}")
        if "squad" in regimes:
            cells.append(f"{min(rhos['squad']):.3f} / {statistics.median(rhos['squad']):.3f}")
        cells += [f"{gold[r]}/{len(rhos[r])}" for r in regimes]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
