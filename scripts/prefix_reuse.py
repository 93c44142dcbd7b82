"""The prompt prefix each step keeps for an upstream's prefix cache, measured on the embedded model.

Starts `contextlift serve` in front of the embedded SmolLM2 model with `local_model_reuse_prompt=true` (llama.cpp
then keeps the previous prompt's key-value cache and evaluates only what follows the longest common prefix; its
usage says how many prompt tokens that spared, as `prompt_tokens_details.cached_tokens`, OpenAI's field). For each
scenario and strategy it sends an unrelated prompt (so the cache holds nothing of the scenario), then the first
request and the second, and prints the second's prompt tokens, cached tokens and latency.

The requests are Open WebUI's own (tests/strategies/app_prompts/python_apps/open_webui.py: its 0.12.4 template and
joins, real chunks cut by real splitters), with `RAG_SYSTEM_CONTEXT=True`, the setting Open WebUI added so that the
documents sit in the system message, before the conversation, for the prefix cache:

- `two questions`: the same retrieval for two questions in two chats;
- `second turn`: the same chat's second question, over the same documents, its first turn and answer before it.

    .venv/bin/python scripts/prefix_reuse.py [--strategies none,reorder,focus,excerpt] [--markdown]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.local_serving import serving
from tests.strategies.app_prompts.corpus import picked
from tests.strategies.app_prompts.python_apps.open_webui import USER_SYSTEM_PROMPT, apply_source_context

CHUNKS = ("maskedarray", (0, 7, 9, 12))
FIRST = "Should masked arrays be filled before processing or not?"
SECOND = "Is numpy.ma.MaskedArray a subclass of ndarray?"
FLUSH = "Name three colours of the rainbow."


MODEL = "smollm2"
"""Replaced by the name the embedded model lists, once it is up."""


def open_webui(question: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The body Open WebUI 0.12.4 sends with RAG_SYSTEM_CONTEXT=True: the chat's system prompt with the filled
    template appended, then the conversation."""
    messages = [
        {"role": "system", "content": USER_SYSTEM_PROMPT},
        *(history or []),
        {"role": "user", "content": question},
    ]
    messages, _ = apply_source_context(messages, picked(CHUNKS[0], *CHUNKS[1]), question, system_context=True)
    return {"model": MODEL, "messages": messages, "max_tokens": 32, "temperature": 0}


def scenarios(first_answer: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": first_answer}]
    return {
        "two questions": (open_webui(FIRST), open_webui(SECOND)),
        "second turn": (open_webui(FIRST), open_webui(SECOND, history)),
    }


def ask(client: httpx.Client, body: dict[str, Any], strategy: str) -> tuple[dict[str, Any], float, str]:
    started = time.perf_counter()
    response = client.post("/v1/chat/completions", json=copy.deepcopy(body), headers={"X-Context-Strategy": strategy})
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    applied = response.headers.get("x-context-strategy", "")
    order = response.headers.get("x-context-order")
    return response.json(), elapsed, applied + (f"`, order `{order}" if order else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", default="none,reorder,focus,excerpt")
    parser.add_argument("--log", type=Path, default=Path("prefix-reuse.log"))
    arguments = parser.parse_args()
    strategies = [s.strip() for s in arguments.strategies.split(",") if s.strip()]
    rows = []
    with (
        serving(arguments.log, local_model_reuse_prompt="true") as url,
        httpx.Client(base_url=url, timeout=600) as client,
    ):
        global MODEL
        MODEL = client.get("/v1/models").json()["data"][0]["id"]
        first_answer = ask(client, open_webui(FIRST), "none")[0]["choices"][0]["message"]["content"]
        for scenario, (first, second) in scenarios(first_answer).items():
            for strategy in strategies:
                ask(client, {"model": MODEL, "messages": [{"role": "user", "content": FLUSH}], "max_tokens": 8},
                    "none")  # fmt: skip
                _, first_seconds, _ = ask(client, first, strategy)
                answer, seconds, applied = ask(client, second, strategy)
                usage = answer.get("usage") or {}
                cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                rows.append((scenario, strategy, usage.get("prompt_tokens"), cached, first_seconds, seconds, applied))
    print("| scenario | strategy | second request's prompt tokens | from the cache | share | first / second request |"
          " X-Context-Strategy of the second |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for scenario, strategy, prompt, cached, first_seconds, seconds, applied in rows:
        share = f"{cached / prompt:.0%}" if prompt and cached is not None else "-"
        print(f"| {scenario} | `{strategy}` | {prompt} | {cached} | {share} | {first_seconds:.1f} s / {seconds:.1f} s |"
              f" `{applied}` |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
