"""An `embeddings` ranker against a real OpenAI-compatible embeddings server: llama.cpp's server in embedding
mode (the local-model extra), serving the bundled SmolLM2 model's mean-pooled embeddings. The proxy ranks with
it, end to end; then with the server gone, the same ranker falls back and the request still succeeds."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contextlift.proxy.local_model import bundled_model_path, free_port
from tests.e2e.local_serving import serving

pytestmark = pytest.mark.e2e

DOCS = [
    "The Kestrel Guild's first ship was the Longwater.",
    "Venn is a harbour town with a stone lighthouse.",
    "Ravel Oduya was born in the mountain village of Osk.",
    "The bone flute is played at weddings in Osk.",
]
BODY = {
    "model": "smollm2",
    "max_tokens": 8,
    "messages": [
        {
            "role": "user",
            "content": "Write a high-quality answer for the given question using only the provided search results.\n\n"
            + "\n".join(f"Document [{i}](Title: T{i}) {d}" for i, d in enumerate(DOCS, 1))
            + "\n\nQuestion: where was Ravel Oduya born?\nAnswer:",
        }
    ],
}


@pytest.fixture(scope="module")
def embeddings_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = (tmp_path_factory.mktemp("embeddings") / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(bundled_model_path()), "--embedding", "true",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1/embeddings"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            assert process.poll() is None, "the embeddings server exited"
            try:
                if httpx.post(url, json={"input": ["ping"]}, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise AssertionError("the embeddings server did not answer")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def test_a_real_embeddings_server_ranks_through_the_proxy(embeddings_server: str, tmp_path: Path) -> None:
    answer = httpx.post(embeddings_server, json={"input": ["a", "b"]}, timeout=30).json()
    assert len(answer["data"]) == 2  # the real server's shape, as the ranker reads it
    rankers = {"llama": {"kind": "embeddings", "url": embeddings_server, "timeout": 30}}
    with serving(tmp_path / "serve.log", rankers=json.dumps(rankers)) as url, httpx.Client(timeout=300) as client:
        response = client.post(
            f"{url}/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=llama"}
        )
        metrics = client.get(f"{url}/metrics").text
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "reorder; ranker=llama; gate=unmeasured"  # a service: no gate
    assert 'contextlift_rankings_total{outcome="ok",ranker="llama"} 1.0' in metrics


def test_without_the_server_the_ranker_falls_back_and_the_request_succeeds(tmp_path: Path) -> None:
    rankers = {"gone": {"kind": "embeddings", "url": f"http://127.0.0.1:{free_port()}/v1/embeddings"}}
    with serving(tmp_path / "serve.log", rankers=json.dumps(rankers)) as url, httpx.Client(timeout=300) as client:
        response = client.post(
            f"{url}/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder; ranker=gone"}
        )
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "reorder; ranker=gone; ranker-fallback=gone:unreachable"
    assert response.json()["choices"][0]["message"]["content"] is not None
