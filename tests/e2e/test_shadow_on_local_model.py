"""Shadow evaluation against the real SmolLM2 model and the real embedder: `contextlift serve` with every request
sampled answers as usual, and after the responses the sink holds one record per request with each candidate's
answer compared by the real embedder and the documents' other orders tried; `shadow-report` reads it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.local_serving import serving
from tests.e2e.test_strategies_on_local_model import MESSAGES

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("shadow")
    sink = folder / "shadow.jsonl"
    # The embedded model takes no key: shadow may use the (absent) client credentials, as it would otherwise not run.
    shadow = {
        "shadow_rate": "1",
        "shadow_strategies": '["reorder"]',
        "shadow_capture": "true",
        "shadow_use_client_key": "true",
    }
    with serving(folder / "serve.log", shadow_sink=str(sink), **shadow) as url:
        yield url, sink


def evaluated(url: str) -> int:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith('contextlift_shadow_samples_total{outcome="evaluated"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_served_as_usual_then_evaluated_in_the_background(shadowed: tuple[str, Path], tmp_path: Path) -> None:
    url, sink = shadowed
    body = {"model": "smollm2", "messages": MESSAGES, "max_tokens": 24, "temperature": 0}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=300)
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "none"
    assert response.headers["x-context-upstream-calls"] == "1"
    deadline = time.monotonic() + 300
    while evaluated(url) < 1:
        assert time.monotonic() < deadline, "the shadow evaluation did not finish"
        time.sleep(1)
    # The sink also holds the process's `shadow-tally` lines (what became of every sample): the record is the other.
    (record,) = [r for r in map(json.loads, sink.read_text().splitlines()) if r.get("kind") != "shadow-tally"]
    assert record["documents"] == 10
    assert [row["strategy"] for row in record["candidates"]] == ["reorder"]
    assert all(row["error"] is None and row["similarity"] is not None for row in record["candidates"])
    assert [row["strategy"] for row in record["position"]] == ["order=reversed", "order=permuted"]
    assert record["captured"]["served"] == response.json()["choices"][0]["message"]["content"]
    result = subprocess.run(
        [sys.executable, "-m", "contextlift.proxy.cli", "shadow-report", str(sink), "--out", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "1 evaluated requests; position-sensitive" in result.stdout
