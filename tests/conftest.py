from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from litestar.testing import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import contextlift.proxy.app
from contextlift.proxy import Settings, create_app
from tests.collector import freeze_session_heap, unfreeze_what_the_test_froze
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """A test that configures logging (the CLI does, onto the stderr pytest captures and later closes) must
    not leave the next test's log lines going to a closed stream."""
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (frameworks, the modules under test) lives as long as the run: frozen, so a full
    collection late in the run does not walk it (`tests/collector.py`)."""
    freeze_session_heap()


@pytest.fixture(autouse=True)
def _collector_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An app a test builds tunes the collector only when its settings name `gc_tuned`: each start-up's freeze
    takes the test's objects with it, and undoing it costs a full collection of the run's heap (32 of them took
    29 s over eight proxy test modules). After a test whose app froze, what it froze is freed; the thresholds
    are given back after every test. Proxies the tests start in other processes keep the default."""
    threshold = gc.get_threshold()
    froze: list[bool] = []
    freeze = contextlift.proxy.app._freeze_startup_objects

    def freeze_when_asked(settings: Settings) -> None:
        if "gc_tuned" in settings.model_fields_set:
            froze.append(settings.gc_tuned)
            freeze(settings)

    monkeypatch.setattr(contextlift.proxy.app, "_freeze_startup_objects", freeze_when_asked)
    yield
    if any(froze):
        unfreeze_what_the_test_froze()
    gc.set_threshold(*threshold)


@pytest.fixture(autouse=True)
def _spans_dropped() -> Iterator[None]:
    """Once a test set the global provider, every later test's spans reach the exporter: dropped after each
    test, so they do not pile up in the heap for the rest of the run."""
    yield
    _EXPORTER.clear()


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    """Spans finished during the test. The provider is global and can be set once per process: set it here."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    return _EXPORTER


UNGATED = {"lexical": 0.0, "minilm": 0.0, "fusion": 0.0}
"""The measured rankers' gates opened: a ranked step acts on every ranking."""


@pytest.fixture
def fake() -> FakeUpstream:
    return FakeUpstream()


@pytest.fixture
def make_client(fake: FakeUpstream) -> Iterator[Any]:
    """Builds a test client of the proxy in front of the fake upstream; settings overrides as keywords. Its ranked
    steps act on every ranking (`ranker_gates` 0): these tests are about what a step does when it acts; the gate's
    own tests (tests/proxy/pipelines/test_one_gate_for_every_ranked_step.py) set the measured gates back."""
    clients: list[TestClient[Any]] = []

    def build(**overrides: Any) -> TestClient[Any]:
        settings = Settings(**{"upstream_url": UPSTREAM, "retry_backoff": 0.0, "ranker_gates": UNGATED, **overrides})
        app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Any) -> TestClient[Any]:
    return make_client()
