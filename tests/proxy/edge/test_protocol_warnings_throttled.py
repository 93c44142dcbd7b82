"""A client cannot flood the log through uvicorn's per-connection warnings, on real sockets: of 40 malformed
requests, each on its own connection and each still answered 400 in the envelope, one warning is written in
the interval; the next one written says how many were held back. The app's own errors are never held back."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.http_protocol import ThrottledWarnings
from contextlift.proxy.edge.server import build_server
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM, serve_in_thread

ATTEMPTS = 40


class Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def at(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture
def uvicorn_log() -> Iterator[Recorded]:
    recorded = Recorded()
    logger = logging.getLogger("uvicorn.error")
    level = logger.level
    logger.addHandler(recorded)
    logger.setLevel(logging.DEBUG)
    try:
        yield recorded
    finally:
        logger.removeHandler(recorded)
        logger.setLevel(level)


def malformed(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        return connection.recv(4096)


@pytest.mark.parametrize(
    "request_bytes",
    [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n"],
    ids=["bad request line", "bad header name"],
)
def test_a_flood_of_malformed_requests_writes_one_warning(uvicorn_log: Recorded, request_bytes: bytes) -> None:
    settings = Settings(upstream_url=UPSTREAM, log_level="info")
    app = create_app(settings, transport=FakeUpstream().transport(), embedder=FakeEmbedder())
    with serve_in_thread(build_server(app, settings)) as (port, _):
        answers = [malformed(port, request_bytes) for _ in range(ATTEMPTS)]
    assert all(a.startswith(b"HTTP/1.1 400 ") and b'"malformed_http"' in a for a in answers)
    assert uvicorn_log.at(logging.WARNING) == ["Invalid HTTP request received."]


def test_the_next_warning_written_counts_those_held_back(uvicorn_log: Recorded) -> None:
    throttled = ThrottledWarnings(interval=0.0)
    throttled.warning("first")
    held = ThrottledWarnings(interval=3600)
    held.warning("one")
    held.warning("two")
    held.warning("three")
    held._next_at = 0.0  # the interval is over
    held.warning("four")
    assert uvicorn_log.at(logging.WARNING) == [
        "first",
        "one",
        "four (and 2 more client protocol warnings held back since the last one)",
    ]
    assert uvicorn_log.at(logging.DEBUG) == ["two", "three"]


def test_errors_are_never_held_back(uvicorn_log: Recorded) -> None:
    throttled = ThrottledWarnings(interval=3600)
    for n in range(3):
        throttled.warning("client fault")
        throttled.error("Exception in ASGI application %d", n)
    assert uvicorn_log.at(logging.ERROR) == [f"Exception in ASGI application {n}" for n in range(3)]
