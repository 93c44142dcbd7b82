"""The proxy an eval runs through when no `--proxy` is given: started in a thread of this process, on a free
loopback port (or `--port`), in front of the configured upstream (or the embedded model, started for the run, whose
measured speed prices the run before its first request). The only module of `eval` that imports `proxy`; the rest
reaches the proxy over HTTP like any client."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from contextlift.eval.command import EvalError
from contextlift.eval.timing import Speed
from contextlift.proxy import LocalModelError, Settings, create_app
from contextlift.proxy.edge.server import ProxyServer, build_server
from contextlift.proxy.embedded_models import embedded_model
from contextlift.proxy.local_model import upstream_for


@dataclass(frozen=True, slots=True)
class InProcessProxy:
    url: str
    """The proxy's base URL (`.../v1`)."""
    upstream_identity: dict[str, Any] | None
    """The embedded model's identity where it is the upstream (`LocalModel.identity`), else None."""


@contextlib.contextmanager
def proxy_in_process(settings: Settings, port: int = 0) -> Iterator[InProcessProxy]:
    """The proxy, ready (embedder loaded) when yielded; stopped with the block. `port` 0: a free one.

    Raises:
        EvalError: the port is taken or is not a port (before any upstream is started: an argument error).
        LocalModelError: the proxy did not become ready.
    """
    listener = _listener(port)
    try:
        with upstream_for(settings, quiet=True) as upstream:
            settings = settings.model_copy(update={"upstream_url": upstream.url})
            port = listener.getsockname()[1]
            server = build_server(create_app(settings), settings)
            thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="eval-proxy", daemon=True)
            thread.start()
            try:
                startup = f"http://127.0.0.1:{port}/startupz"
                _wait_started(server, thread, startup, settings.local_model_startup_timeout)
                yield InProcessProxy(f"http://127.0.0.1:{port}/v1", upstream.identity)
            finally:
                server.should_exit = True
                thread.join(timeout=settings.shutdown_grace + 5)
    finally:
        listener.close()


def embedded_speed(settings: Settings) -> Speed | None:
    """The speed measured for the embedded model these settings start (its row in `proxy.embedded_models`, from
    docs/performance.md), which prices a run before its first request; None where an upstream is set or the model
    file is one of the user's, whose speed nobody measured."""
    if settings.upstream_url or settings.local_model_path:
        return None
    model = embedded_model(settings.local_model)
    return Speed.known(
        model.prompt_tokens_per_s,
        model.generated_tokens_per_s,
        f"measured for {model.name} on 2 idle CPU cores (docs/performance.md)",
    )


def _listener(port: int) -> socket.socket:
    """A socket bound to `port` on loopback.

    Raises:
        EvalError: the port is taken (the system's reason), or is not one (outside 0-65535).
    """
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", port))
    except OSError as error:
        listener.close()
        raise EvalError(f"--port {port}: {error.strerror or error}") from None
    except OverflowError:
        listener.close()
        raise EvalError(f"--port {port}: not a port (0 to 65535)") from None
    return listener


def _wait_started(server: ProxyServer, thread: threading.Thread, url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and thread.is_alive():
        if server.started:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code == 200:
                    return
        time.sleep(0.2)
    raise LocalModelError(f"the proxy started for the eval did not become ready within {timeout:.0f} s")
