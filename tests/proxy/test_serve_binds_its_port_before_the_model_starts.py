"""`contextlift serve` holds its port before anything slow starts: a port that is taken stops it at once, with one
line that says so, before the embedded model is started (minutes); `proxy started` is said with the port already
held, and `listening` only once the port takes connections."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest
import structlog

from contextlift.proxy import cli
from contextlift.proxy.edge.server import ProxyServer, build_server
from contextlift.proxy.embedded_models import LocalModelError
from contextlift.proxy.local_model import free_port
from tests.serving import fake_upstream_url


class _Exited(Exception):
    """What `_exit_now` raises here instead of ending the test run's process."""


def _exited(code: int) -> NoReturn:
    raise _Exited(code)


@pytest.fixture(autouse=True)
def _in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` run in this process: its logging left to the test, its exit an exception, no upstream configured."""
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    monkeypatch.setattr(cli, "_exit_now", _exited)
    monkeypatch.delenv("CONTEXTLIFT_UPSTREAM_URL", raising=False)


def test_a_taken_port_stops_serve_before_the_embedded_model_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[bool] = []

    @contextlib.contextmanager
    def fake_embedded_model(settings: Any, **_: Any) -> Iterator[Any]:
        started.append(True)
        raise LocalModelError("the fake embedded model was started")
        yield  # pragma: no cover

    monkeypatch.setattr(cli, "upstream_for", fake_embedded_model)
    with socket.socket() as holder, structlog.testing.capture_logs() as logs:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code = cli.main(["serve", "--port", str(port)])
    assert code == 1
    assert started == []
    [line] = [line for line in logs if line["event"] == "cannot start"]
    assert line["error"].startswith(f"cannot listen on 127.0.0.1:{port}: ")
    assert "another process listens there" in line["error"]


async def _fake_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    raise AssertionError("nothing here asks the upstream")


def _connects(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_the_port_is_held_when_the_proxy_starts_and_takes_connections_when_it_says_listening(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    servers: list[ProxyServer] = []
    seen: dict[str, bool] = {}

    def kept(*args: Any, **kwargs: Any) -> ProxyServer:
        servers.append(build_server(*args, **kwargs))
        return servers[-1]

    def probe(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
        """At each line, where the port stands: held by the proxy (nobody else may bind it), taking connections."""
        if event["event"] == "proxy started":
            seen["held when started"] = not _bindable(port)
        elif event["event"] == "listening":
            seen["connects when listening"] = _connects(port)
            servers[0].should_exit = True
        raise structlog.DropEvent

    monkeypatch.setattr(cli, "build_server", kept)
    # Every level reaches the probe, whatever level an earlier test's logging left the wrapper at.
    structlog.configure(processors=[probe], wrapper_class=structlog.make_filtering_bound_logger(logging.NOTSET))
    outcome: list[BaseException] = []

    def serve(url: str) -> None:
        try:
            cli.main(["serve", "--upstream", url, "--port", str(port)])
        except _Exited as exited:
            outcome.append(exited)

    with fake_upstream_url(_fake_upstream) as url:
        thread = threading.Thread(target=serve, args=(url,), daemon=True)
        thread.start()
        thread.join(60)
        stuck = thread.is_alive()
        if stuck and servers:  # never said `listening`: stopped here, so that it does not outlive the test
            servers[0].should_exit = True
            thread.join(10)
    assert not stuck
    assert [exited.args for exited in outcome] == [(0,)]
    assert seen == {"held when started": True, "connects when listening": True}
