"""Benchmark: accuracy and latency of each strategy on 10-document fictional-fact QA, gold document in the
middle, against a running proxy. Prints one line per strategy; ratios are measured side by side in one run.

    .venv/bin/python scripts/measure_strategies.py --proxy http://127.0.0.1:8080 --questions 20
"""

from __future__ import annotations

import argparse
import random
import re
import string
import time

import httpx

SYLLABLES = ["zor", "vath", "quel", "moor", "brin", "dle", "ost", "mark", "vel", "lan", "har", "row", "tes"]
SYLLABLES += ["sa", "ly", "dun", "more", "cad", "dock", "lo", "ris", "ka", "mir", "tal", "wen", "fro", "gel"]
TEMPLATES = [
    ("The capital of the kingdom of {e} is {a}.", "What is the capital of the kingdom of {e}?"),
    ("The river that runs through {e} is called the {a}.", "What is the river that runs through {e} called?"),
    ("The founder of the city of {e} was a weaver named {a}.", "Who founded the city of {e}?"),
    ("The highest mountain of {e} is Mount {a}.", "What is the highest mountain of {e}?"),
]
INSTRUCTION = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant)."
)
STRATEGIES = ["none", "reorder", "query-aware", "recite", "fact", "medoid; k=5"]


def name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def case(rng: random.Random, documents: int, gold_at: int) -> tuple[str, str]:
    facts = []
    for _ in range(documents):
        entity, answer = name(rng), name(rng)
        fact, question = rng.choice(TEMPLATES)
        facts.append((entity, fact.format(e=entity, a=answer), question.format(e=entity), answer))
    gold = facts[0]
    order = facts[1:]
    order.insert(gold_at, gold)
    lines = "\n".join(f"Document [{i}](Title: {e}) {text}" for i, (e, text, _, _) in enumerate(order, 1))
    return f"{INSTRUCTION}\n\n{lines}\n\nQuestion: {gold[2]}\nAnswer:", gold[3]


def normalize(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def best_subspan_em(prediction: str, answer: str) -> float:
    first_line = prediction.strip().split("\n")[0]
    return float(normalize(answer) in normalize(first_line))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", default="http://127.0.0.1:8080")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--documents", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cases = [case(rng, args.documents, args.documents // 2 - 1) for _ in range(args.questions)]
    results: dict[str, tuple[float, float, float]] = {}
    with httpx.Client(base_url=f"{args.proxy}/v1", timeout=600) as client:
        for strategy in STRATEGIES:
            correct, seconds, calls = 0.0, 0.0, 0
            for prompt, answer in cases:
                started = time.perf_counter()
                response = client.post(
                    "/chat/completions",
                    json={"model": "local", "messages": [{"role": "user", "content": prompt}], "max_tokens": 32,
                          "temperature": 0.0 if strategy != "medoid; k=5" else 0.7},
                    headers={"X-Context-Strategy": strategy},
                )  # fmt: skip
                seconds += time.perf_counter() - started
                response.raise_for_status()
                calls += int(response.headers["x-context-upstream-calls"])
                correct += best_subspan_em(response.json()["choices"][0]["message"]["content"] or "", answer)
            results[strategy] = (correct / len(cases), seconds / len(cases), calls / len(cases))
    base_latency = results["none"][1]
    print(f"{args.questions} questions, {args.documents} documents, gold at position {args.documents // 2}")
    print(f"{'strategy':<14} {'accuracy':>8} {'latency s':>10} {'x none':>7} {'calls':>6}")
    for strategy, (accuracy, latency, calls_per) in results.items():
        print(f"{strategy:<14} {accuracy:>8.2f} {latency:>10.2f} {latency / base_latency:>7.2f} {calls_per:>6.1f}")


if __name__ == "__main__":
    main()
