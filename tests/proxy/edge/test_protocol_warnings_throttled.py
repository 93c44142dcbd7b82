"""A client cannot flood the log through uvicorn's per-connection warnings, on real sockets: of 40 malformed
requests, each on its own connection and each still answered uvicorn's 400, one warning is written in the
interval; the next one written says how many were held back. The app's own errors are never held back."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.connection import ThrottledWarnings
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
    """uvicorn's connection logger, recorded, with no throttle on it: the one `build_server` adds lives as long as
    the process, and a warning an earlier test caused would hold this test's back."""
    recorded = Recorded()
    logger = logging.getLogger("uvicorn.error")
    level, filters = logger.level, logger.filters[:]
    logger.filters[:] = [f for f in filters if not isinstance(f, ThrottledWarnings)]
    logger.addHandler(recorded)
    logger.setLevel(logging.DEBUG)
    try:
        yield recorded
    finally:
        logger.removeHandler(recorded)
        logger.setLevel(level)
        logger.filters[:] = filters


@pytest.fixture
def throttled() -> Iterator[tuple[logging.Logger, Recorded]]:
    """A logger of its own with a handler that records what the filters let through."""
    logger = logging.getLogger("tests.throttled_warnings")
    recorded = Recorded()
    logger.addHandler(recorded)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, recorded
    finally:
        logger.removeHandler(recorded)
        logger.filters.clear()


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
    assert all(a.startswith(b"HTTP/1.1 400 ") and a.endswith(b"Invalid HTTP request received.") for a in answers)
    assert uvicorn_log.at(logging.WARNING) == ["Invalid HTTP request received."]


def test_building_servers_adds_one_throttle_to_uvicorns_logger(uvicorn_log: Recorded) -> None:
    settings = Settings(upstream_url=UPSTREAM)
    for _ in range(2):
        build_server(create_app(settings, transport=FakeUpstream().transport(), embedder=FakeEmbedder()), settings)
    logger = logging.getLogger("uvicorn.error")
    assert len([f for f in logger.filters if isinstance(f, ThrottledWarnings)]) == 1


def test_the_next_warning_written_counts_those_held_back(throttled: tuple[logging.Logger, Recorded]) -> None:
    logger, recorded = throttled
    unthrottled = ThrottledWarnings(interval=0.0)
    logger.addFilter(unthrottled)
    logger.warning("first")
    logger.removeFilter(unthrottled)
    held = ThrottledWarnings(interval=3600)
    logger.addFilter(held)
    logger.warning("one")
    logger.warning("two")
    logger.warning("three")
    held._next_at = 0.0  # the interval is over
    logger.warning("four %s", "with args")
    assert recorded.at(logging.WARNING) == [
        "first",
        "one",
        "four with args (and 2 more client protocol warnings held back since the last one)",
    ]


def test_errors_are_never_held_back(throttled: tuple[logging.Logger, Recorded]) -> None:
    logger, recorded = throttled
    logger.addFilter(ThrottledWarnings(interval=3600))
    for n in range(3):
        logger.warning("client fault")
        logger.error("Exception in ASGI application %d", n)
    assert recorded.at(logging.ERROR) == [f"Exception in ASGI application {n}" for n in range(3)]
    assert recorded.at(logging.WARNING) == ["client fault"]
