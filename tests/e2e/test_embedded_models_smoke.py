"""One smoke test per larger embedded model: its slices installed from the index, assembled and checked, served by
`contextlift serve --model NAME` as a user starts it, and one answer through the proxy. Skipped, with the command
that installs them, where the model's packages are absent (the suite's own end-to-end tests run on SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from contextlift.proxy.embedded_models import MODELS, missing_packages
from tests.e2e.local_serving import serving

pytestmark = pytest.mark.e2e

LITM_PROMPT = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).\n\n"
    "Document [1](Title: Brindle) Brindle is a small river town known for its ferries.\n"
    "Document [2](Title: Zorvath) The capital of the kingdom of Zorvath is Quellmoor.\n"
    "Document [3](Title: Ostmark) Ostmark exports copper and wool.\n\n"
    "Question: what is the capital of Zorvath?\nAnswer:"
)
QUESTION: Any = [{"role": "user", "content": LITM_PROMPT}]


@pytest.mark.parametrize("name", [name for name in MODELS if name != "smollm2-135m"])
def test_the_model_is_assembled_checked_and_answers_through_the_proxy(name: str, tmp_path: Path) -> None:
    model = MODELS[name]
    if missing := missing_packages(model):
        pytest.skip(f"{name}'s {len(missing)} packages are not installed: scripts/install local-model,{model.extra}")
    log = tmp_path / "serve.log"
    with (
        serving(log, local_model=name, local_model_context="2048", local_model_cache=str(tmp_path)) as url,
        openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=300) as sdk,
    ):
        assert [m.id for m in sdk.models.list()] == [model.alias]
        raw = sdk.chat.completions.with_raw_response.create(
            model=model.alias,
            messages=QUESTION,
            max_tokens=24,
            temperature=0,
            extra_headers={"X-Context-Strategy": "reorder"},
        )
    answer = raw.parse().choices[0].message.content or ""
    assert "quellmoor" in answer.lower()
    assert raw.headers["x-context-order"] == "2,1,3"
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert not [e for e in events if e.get("level") == "error"]
    # Assembled here (a fresh cache folder), checked, and stamped: the next start reads none of it again.
    assert "checking the model file once" in [e.get("event") for e in events]
    assert (tmp_path / model.file_name).stat().st_size == model.size
    assert (tmp_path / f".{model.file_name}.checked.json").is_file()
