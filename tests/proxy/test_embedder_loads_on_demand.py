"""The embedder loads when something first needs it, never merely because it is installed: a proxy with the
default settings is started (/startupz) with MiniLM unloaded, and loads it, in a worker thread and once, for the
first request whose strategies rank with it. Concurrent first requests share that load while requests that need
no embedder are served; a failed load answers the requests that need it with an OpenAI envelope and the others
as before. A setting that needs it for every request (or `embedder = preload`) loads it at start-up instead, and
/startupz waits for it.

The real `SentenceTransformerEmbedder` is built here as the proxy builds it; only its `load` is replaced, by one
that a test can hold open or make fail, and that installs a fake model instead of MiniLM."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import structlog
from litestar.testing import TestClient

from contextlift.proxy import Settings, create_app
from contextlift.strategies import SentenceTransformerEmbedder
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM, chat

LITM = (
    "Answer from the documents.\n\nDocument [1](Title: A) Alpha grows in spring.\nDocument [2](Title: B) Beta is a "
    "river.\nDocument [3](Title: C) Gamma rays come from stars.\n\nQuestion: Where do gamma rays come from?\nAnswer:"
)
MINILM = {"x-context-strategy": "reorder; ranker=minilm; order=descending"}
LEXICAL = {"x-context-strategy": "reorder; order=descending"}
WAIT = 10.0


class FakeModel:
    """Stands in for the SentenceTransformer that `load` would build."""

    device = "cpu"

    def encode(self, texts: list[str], **_: Any) -> Any:
        return FakeEmbedder().embed(texts)


class Loads:
    """What replaces `SentenceTransformerEmbedder.load`: counts its calls, notes whether each ran on an event
    loop, waits for `gate`, then installs the fake model, or raises `failure`."""

    def __init__(self) -> None:
        self.calls = 0
        self.on_a_loop: list[bool] = []
        self.gate = threading.Event()
        self.gate.set()
        self.failure: Exception | None = None

    def __call__(self, embedder: SentenceTransformerEmbedder) -> None:
        self.calls += 1
        self.on_a_loop.append(_running_loop() is not None)
        assert self.gate.wait(WAIT), "the test never opened the gate"
        if self.failure is not None:
            raise self.failure
        embedder._model = FakeModel()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@pytest.fixture(autouse=True)
def logs_at_every_level() -> Iterator[None]:
    """Loggers that pass info lines on: a test before these that left structlog filtering at warning (an eval's
    in-process proxy logs warnings only) had the start-up line dropped before `capture_logs` could see it."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET))
    yield
    structlog.configure(**saved)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loads]:
    fake_load = Loads()
    monkeypatch.setattr("contextlift.proxy.app.embeddings_installed", lambda: True)
    monkeypatch.setattr(SentenceTransformerEmbedder, "load", lambda self: fake_load(self))
    yield fake_load
    fake_load.gate.set()


def app(fake: FakeUpstream, **overrides: Any) -> Any:
    settings = Settings(**{"upstream_url": UPSTREAM, "retry_backoff": 0.0, **overrides})
    return create_app(settings, transport=fake.transport())


def test_default_settings_start_without_loading_it_and_load_it_for_the_first_request_that_ranks_with_it(
    loads: Loads, fake: FakeUpstream
) -> None:
    with structlog.testing.capture_logs() as logs, TestClient(app(fake), raise_server_exceptions=False) as client:
        assert client.get("/startupz").json() == {"status": "started"}
        assert client.get("/readyz").status_code == 200
        assert client.post("/v1/chat/completions", json=chat(LITM)).status_code == 200
        assert client.post("/v1/chat/completions", json=chat(LITM), headers=LEXICAL).status_code == 200
        assert loads.calls == 0
        response = client.post("/v1/chat/completions", json=chat(LITM), headers=MINILM)
        assert response.status_code == 200
        assert "ranker-fallback" not in response.headers["x-context-strategy"]
        client.post("/v1/chat/completions", json=chat(LITM), headers=MINILM)
    assert loads.calls == 1
    assert loads.on_a_loop == [False]
    started = next(line for line in logs if line["event"] == "proxy started")
    assert started["embedder"] == "on-demand"
    assert started["embedder_preloaded_for"] is None


def test_concurrent_first_requests_share_one_load_while_others_are_served(loads: Loads, fake: FakeUpstream) -> None:
    loads.gate.clear()
    with TestClient(app(fake), raise_server_exceptions=False) as client, ThreadPoolExecutor(3) as pool:
        waiting = [pool.submit(client.post, "/v1/chat/completions", json=chat(LITM), headers=MINILM) for _ in range(3)]
        deadline = time.monotonic() + WAIT
        while loads.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        served = client.post("/v1/chat/completions", json=chat(LITM), headers=LEXICAL)
        assert served.status_code == 200
        assert not any(future.done() for future in waiting)
        loads.gate.set()
        responses = [future.result(WAIT) for future in waiting]
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert all("ranker-fallback" not in r.headers["x-context-strategy"] for r in responses)
    assert loads.calls == 1


def test_a_failed_load_answers_the_requests_that_need_it_with_the_error_and_serves_the_others(
    loads: Loads, fake: FakeUpstream
) -> None:
    loads.failure = OSError("model files missing")
    with TestClient(app(fake), raise_server_exceptions=False) as client:
        first = client.post("/v1/chat/completions", json=chat(LITM), headers=MINILM)
        again = client.post("/v1/chat/completions", json=chat(LITM), headers={"x-context-strategy": "medoid; k=2"})
        for response in (first, again):
            assert response.status_code == 503
            assert response.json()["error"] == {
                "message": "embedder failed to load: OSError: model files missing",
                "type": "server_error",
                "param": None,
                "code": "not_ready",
            }
        assert client.post("/v1/chat/completions", json=chat(LITM)).status_code == 200
        assert client.post("/v1/chat/completions", json=chat(LITM), headers=LEXICAL).status_code == 200
        assert client.get("/startupz").json() == {"status": "started"}
    assert loads.calls == 1  # final: not tried again per request
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("overrides", "preloaded_for"),
    [
        ({"embedder": "preload"}, "embedder"),
        ({"default_ranker": "minilm"}, "default_ranker"),
        ({"default_strategies": {"*": "reorder; ranker=minilm"}}, "default_strategies"),
        ({"shadow_rate": 0.5}, "shadow_rate"),
    ],
)
def test_a_setting_that_needs_it_loads_it_at_start_up_and_startupz_waits(
    loads: Loads, fake: FakeUpstream, overrides: dict[str, Any], preloaded_for: str
) -> None:
    loads.gate.clear()
    with structlog.testing.capture_logs() as logs, TestClient(app(fake, **overrides)) as client:
        starting = client.get("/startupz")
        loads.gate.set()
        deadline = time.monotonic() + WAIT
        while client.get("/startupz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.get("/startupz").json() == {"status": "started"}
    assert starting.status_code == 503
    assert starting.json() == {"status": "starting"}
    assert loads.calls == 1
    started = next(line for line in logs if line["event"] == "proxy started")
    assert (started["embedder"], started["embedder_preloaded_for"]) == ("loading", preloaded_for)


def test_a_failed_load_at_start_up_fails_startupz(loads: Loads, fake: FakeUpstream) -> None:
    loads.failure = OSError("model files missing")
    with TestClient(app(fake, embedder="preload"), raise_server_exceptions=False) as client:
        deadline = time.monotonic() + WAIT
        while client.get("/startupz").json()["status"] == "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        startupz = client.get("/startupz")
        assert client.post("/v1/chat/completions", json=chat(LITM)).status_code == 200
    assert startupz.status_code == 503
    assert startupz.json() == {"status": "failed", "reasons": ["embedder failed to load: OSError: model files missing"]}


def test_embedder_off_never_loads_it(loads: Loads, fake: FakeUpstream) -> None:
    with structlog.testing.capture_logs() as logs, TestClient(app(fake, embedder="off")) as client:
        assert client.get("/startupz").json() == {"status": "started"}
        assert client.post("/v1/chat/completions", json=chat(LITM), headers=MINILM).status_code == 400
    assert loads.calls == 0
    assert next(line for line in logs if line["event"] == "proxy started")["embedder"] == "off"


def test_default_settings_import_neither_torch_nor_shadow_evaluation() -> None:
    # The real default path, nothing replaced, in a process of its own: started, a reorder (lexical) answered.
    code = """
import sys, httpx
from litestar.testing import TestClient
from contextlift.proxy import Settings, create_app
answer = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0,
          "message": {"role": "assistant", "content": "Stars."}, "finish_reason": "stop"}]}
fake = httpx.MockTransport(lambda request: httpx.Response(200, json=answer))
app = create_app(Settings(upstream_url="http://127.0.0.1:9/v1"), transport=fake)
prompt = "Document [1](Title: A) Alpha.\\nDocument [2](Title: B) Gamma rays.\\n\\nQuestion: gamma?"
with TestClient(app) as client:
    assert client.get("/startupz").json() == {"status": "started"}
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": "reorder"})
    assert response.status_code == 200, response.text
heavy = ("torch", "transformers", "sentence_transformers")
unwanted = [m for m in sys.modules if m.split(".")[0] in heavy or m == "contextlift.proxy.shadow.evaluation"]
assert not unwanted, unwanted
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
