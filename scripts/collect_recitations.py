"""Record what the embedded SmolLM2-135M writes when `recite` asks it to copy the relevant documents: the fixture
`tests/strategies/fixtures/smollm2_recitations.jsonl` that the recitation parser is tested on.

The cases are litm-qa's own (10 documents, gold first / middle / last, easy and hard distractors, seed 0); each
recitation request is exactly the body `recite` sends, at temperature 0. Run from the repository root:

    HF_HUB_OFFLINE=1 PYTHONPATH=. .venv/bin/python scripts/collect_recitations.py --samples 6 \\
        --out tests/strategies/fixtures/smollm2_recitations.jsonl

`--upstream URL` uses a running OpenAI-compatible server instead of starting the embedded model.
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from pathlib import Path

import httpx

from contextlift.eval.runner import request_body
from contextlift.proxy.local_model import LocalModel
from contextlift.strategies import Completion, parse_request
from contextlift.strategies.builtin.recite import _recitation_body
from contextlift.strategies.evidence import answer_text
from tests.strategies.recitations import recitation_cases

MODEL = "smollm2-135m-instruct"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--upstream", help="OpenAI-compatible base URL; default: start the embedded model")
    args = parser.parse_args()
    with ExitStack() as stack:
        base_url = args.upstream or stack.enter_context(LocalModel(quiet=True)).base_url
        with args.out.open("w", encoding="utf-8") as out, httpx.Client(timeout=600) as client:
            for case in recitation_cases(args.samples):
                request = parse_request(request_body(case, MODEL))
                reply = client.post(f"{base_url}/chat/completions", json=_recitation_body(request, 512))
                reply.raise_for_status()
                output = answer_text(Completion(reply.json()))
                line = {"variant": case.variant, "position": case.position, "sample": case.sample, "output": output}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
