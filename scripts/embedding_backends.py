"""Does another inference backend make the embedder cheaper without changing its ranking? (issue 16)

all-MiniLM-L6-v2 as the proxy runs it (sentence-transformers on torch, fp32), against the same weights exported to
ONNX and run by ONNX Runtime in fp32 and with int8 dynamic quantisation (per channel), and against torch in fp16
(what the embedder runs on a GPU; computed here on the CPU, so only its ranking is measured, not its speed). For
60 litm-qa cases of 20 documents (generated with easy distractors, generated with hard ones, SQuAD 2.0 dev's
same-article paragraphs), each backend's query-document similarities are compared with torch's: Spearman's rho
per case, the top document, the lowest cosine between a document's two vectors. Then the CPU time of one cold
embedding of 20 SQuAD documents, one thread each (time.process_time, best and median of 5).

ONNX Runtime is not a dependency of the project; this needs, in the project's venv:

    .venv/bin/pip install onnxruntime onnx
    .venv/bin/python scripts/embedding_backends.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextlift.eval.sources import find_sources  # noqa: E402
from contextlift.eval.tasks.litm_qa import _hard, _invented, _squad  # noqa: E402
from contextlift.strategies.embedder import bundled_model_dir  # noqa: E402

CASES_PER_REGIME = 20
DOCUMENTS = 20


class _Pooled(torch.nn.Module):
    """The transformer with sentence-transformers' mean pooling and normalisation, as one graph to export."""

    def __init__(self, transformer: torch.nn.Module) -> None:
        super().__init__()
        self.transformer = transformer

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(input_ids=ids, attention_mask=mask).last_hidden_state
        summed = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
        return torch.nn.functional.normalize(summed, dim=-1)


def main() -> int:
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    tokenizer = model.tokenizer
    work = Path(tempfile.mkdtemp(prefix="contextlift-onnx-"))
    fp32, int8 = work / "minilm.onnx", work / "minilm-int8.onnx"
    sample = tokenizer(["a b", "c d e"], padding=True, return_tensors="pt")
    torch.onnx.export(
        _Pooled(model[0].auto_model).eval(), (sample["input_ids"], sample["attention_mask"]), str(fp32),
        input_names=["ids", "mask"], output_names=["embedding"], opset_version=17, dynamo=False,
        dynamic_axes={"ids": {0: "batch", 1: "length"}, "mask": {0: "batch", 1: "length"}, "embedding": {0: "batch"}},
    )  # fmt: skip
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True)

    def session(path: Path) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def onnx_embedder(path: Path) -> Callable[[list[str]], np.ndarray]:
        run = session(path)

        def embed(texts: list[str]) -> np.ndarray:
            x = tokenizer(texts, padding=True, truncation=True, max_length=model.max_seq_length, return_tensors="np")
            feeds = {"ids": x["input_ids"].astype(np.int64), "mask": x["attention_mask"].astype(np.int64)}
            return np.asarray(run.run(None, feeds)[0])

        return embed

    def torch_embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=64, normalize_embeddings=True))

    half = SentenceTransformer(str(bundled_model_dir()), device="cpu").half()

    def half_embed(texts: list[str]) -> np.ndarray:
        vectors = np.asarray(half.encode(texts, batch_size=64)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    backends = {"onnxruntime fp32": onnx_embedder(fp32), "onnxruntime int8": onnx_embedder(int8)}
    rankers = {**backends, "torch fp16 (GPU precision)": half_embed}
    squad = find_sources(ROOT.parent / "shared" / "data").squad
    cases = []
    for n in range(CASES_PER_REGIME):
        examples = [_invented(0, DOCUMENTS, n)[0], _hard(0, DOCUMENTS, n)]
        if squad is not None:
            examples.append(_squad(0, squad, DOCUMENTS, n))
        for example in examples:
            texts = [f"{p.title}\n{p.text}" for p in (example.gold, *example.distractors)]
            cases.append((example.question, texts))
    print(f"{len(cases)} cases of {DOCUMENTS} documents; similarities to the question compared with torch fp32")
    print("| backend | Spearman min / median | same top document | lowest cosine to torch's vector |")
    print("|---|---|---|---|")
    for name, embed in rankers.items():
        rhos, same_top, cosines = [], 0, []
        for question, texts in cases:
            reference, other = torch_embed([question, *texts]), embed([question, *texts])
            ours, theirs = reference[1:] @ reference[0], other[1:] @ other[0]
            rhos.append(float(spearmanr(ours, theirs).statistic))
            same_top += int(np.argmax(ours) == np.argmax(theirs))
            cosines.append(float(np.min(np.sum(reference * other, axis=1))))
        print(
            f"| {name} | {min(rhos):.4f} / {statistics.median(rhos):.4f} | {same_top} of {len(cases)} "
            f"| {min(cosines):.4f} |"
        )
    texts = cases[-1][1]
    pieces = sum(len(tokenizer(t, truncation=True, max_length=model.max_seq_length)["input_ids"]) for t in texts)
    print(f"\nCPU time of one embedding of {len(texts)} documents ({pieces} word pieces), one thread:")
    for name, embed in {"torch fp32": torch_embed, **backends}.items():
        embed(texts)
        times = []
        for _ in range(5):
            started = time.process_time()
            embed(texts)
            times.append((time.process_time() - started) * 1000)
        print(f"- {name}: best {min(times):.0f} ms, median {statistics.median(times):.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
