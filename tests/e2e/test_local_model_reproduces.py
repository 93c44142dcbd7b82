"""The embedded model gives the same prompt the same answer within a run, whatever was asked in between, greedy or
sampled: identical prompts interleaved with others that share their instruction, and sampled ones, on the real
SmolLM2 model."""

from __future__ import annotations

import httpx
import pytest

from contextlift.proxy.local_model import LocalModel

pytestmark = pytest.mark.e2e

_FACTS = [("Brindle", "ferries"), ("Ostmark", "copper"), ("Quellmoor", "wool"), ("Zorvath", "glass"), ("Tarn", "salt")]
_DOCUMENTS = [f"Document [{i}](Title: {town}) {town} is known for its {trade}." for i, (town, trade) in
              enumerate(_FACTS, 1)]  # fmt: skip
_INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).\n\n"
)


def _body(question: str, order: list[int], temperature: float) -> dict[str, object]:
    prompt = _INSTRUCTION + "\n".join(_DOCUMENTS[i] for i in order) + f"\n\nQuestion: {question}\nAnswer:"
    return {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 20,
            "temperature": temperature}  # fmt: skip


def test_identical_prompts_get_identical_answers_whatever_came_between() -> None:
    asks = [
        _body(question, order, temperature)
        for temperature in (0.0, 0.9)
        for question, order in (
            ("What is Ostmark known for?", [0, 1, 2, 3, 4]),
            ("What is Tarn known for?", [4, 3, 2, 1, 0]),
        )
    ]
    # Each prompt asked twice: in order, then in reverse, so each second asking follows another prompt than the
    # first did (a shared prefix of another length, another previous seed).
    with LocalModel(quiet=True) as model, httpx.Client(base_url=model.base_url, timeout=300) as client:
        first = [client.post("/chat/completions", json=body).json() for body in asks]
        again = [client.post("/chat/completions", json=body).json() for body in reversed(asks)][::-1]
        identity = model.identity
    texts = [[r["choices"][0]["message"]["content"] for r in run] for run in (first, again)]
    assert texts[0] == texts[1]
    sampled = texts[0][len(asks) // 2 :]
    assert all(sampled), "the sampled answers are not empty"
    assert identity is not None
    assert identity["settings"]["reuse_prompt"] is False
    assert identity["settings"]["seed"] == 0
    assert len(identity["model_sha256"]) == 64
    assert identity["server"].startswith("llama-cpp-python ")
