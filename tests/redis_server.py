"""A real Redis server for the tests of the shared shadow store: Debian's `redis-server`, started on a free loopback
port with nothing persisted, stopped (or killed mid-test) by the test. Without it the calling test is skipped with
the reason; under `CONTEXTLIFT_REQUIRE_DATA=1` (CI, whose `.ci/run` installs it) it fails instead."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.benchmark_data import unavailable

STARTUP_SECONDS = 10.0


@dataclass
class RedisServer:
    port: int
    folder: Path
    password: str | None = None
    options: tuple[str, ...] = ()
    """More of redis-server's arguments (`--maxmemory 2mb`)."""
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL a client names it by, its password included."""
        return f"redis://{f':{self.password}@' if self.password else ''}127.0.0.1:{self.port}/0"

    @property
    def address(self) -> str:
        """The URL without its password, as the proxy and the reports name it."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it answers."""
        binary = shutil.which("redis-server")
        assert binary is not None
        arguments = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        arguments += ["--requirepass", self.password] if self.password else []
        arguments += self.options
        self.process = subprocess.Popen(
            [binary, *arguments, "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith((b"+PONG", b"-NOAUTH")):  # it answers
                    return
            assert self.process.poll() is None, "redis-server stopped while starting"
            time.sleep(0.05)
        raise AssertionError("redis-server did not answer")

    def stop(self) -> None:
        """Kill it, as a server that dies mid-run (nothing is saved: its data is gone)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def require_redis() -> None:
    if shutil.which("redis-server") is None:
        reason = "redis-server (Debian's package) is not on PATH: the shared shadow store cannot be tested"
        unavailable(reason)


@contextlib.contextmanager
def redis_server(folder: Path, password: str | None = None, options: tuple[str, ...] = ()) -> Iterator[RedisServer]:
    """A running Redis on a free loopback port (asking for `password`, where one is given), killed when the block
    ends."""
    require_redis()
    folder.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = RedisServer(port, folder, password, options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
