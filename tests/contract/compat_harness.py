"""The compatibility harness: a scripted fake upstream on a real loopback socket, the proxy served in front of it,
and `Compat.check`, which makes one client call straight to the upstream and once through the proxy and
compares what both ends saw (what is compared, and what is left out, is in `compat_compare`)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import pytest
import uvicorn

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.server import build_server
from tests.contract.compat_compare import (
    CONTROL_PREFIX,
    REQUEST_HEADERS_EACH_HOP_SETS,
    diff,
    differences,
    plain,
    raised,
    shown,
    without_origin,
)
from tests.fakes import FakeEmbedder
from tests.serving import serve_in_thread


@dataclass(frozen=True)
class Reply:
    """One scripted upstream answer: a status, headers and the body in the pieces it is sent in."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    pieces: tuple[bytes, ...] = (b"",)

    @classmethod
    def json(cls, payload: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
        head = (("content-type", "application/json"), *(headers or {}).items())
        return cls(status, tuple(head), (json.dumps(payload).encode(),))

    @classmethod
    def sse(cls, events: Iterable[Any], *, done: bool = True, headers: Mapping[str, str] | None = None) -> Reply:
        """A stream of these events (dicts are sent as JSON), one network write each, then `[DONE]` if `done`."""
        frames = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]
        if done:
            frames.append(b"data: [DONE]\n\n")
        head = (("content-type", "text/event-stream; charset=utf-8"), *(headers or {}).items())
        return cls(200, tuple(head), tuple(frames))


@dataclass
class Received:
    """One request as the upstream received it."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: Any


class ScriptedUpstream:
    """A fake OpenAI-compatible upstream as a raw ASGI app: the n-th request of a run gets the n-th scripted
    reply (the last one once the script runs out), and every request is recorded."""

    def __init__(self) -> None:
        self.script: list[Reply] = [Reply.json({})]
        self.received: list[Received] = []

    def play(self, replies: Iterable[Reply]) -> None:
        """Start a run: this script, nothing received yet."""
        self.script = list(replies)
        self.received = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        self.received.append(_received(scope, b"".join(chunks)))
        reply = self.script[min(len(self.received), len(self.script)) - 1]
        headers = [(k.encode(), v.encode()) for k, v in reply.headers]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        for index, piece in enumerate(reply.pieces):
            last = index == len(reply.pieces) - 1
            await send({"type": "http.response.body", "body": piece, "more_body": not last})


def _received(scope: dict[str, Any], raw: bytes) -> Received:
    kept: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name not in REQUEST_HEADERS_EACH_HOP_SETS and not name.startswith(CONTROL_PREFIX):
            kept[name] = f"{kept[name]}, {value}" if name in kept else value
    query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    try:
        body: Any = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")
    return Received(scope["method"], scope["path"], query, kept, body)


@contextlib.contextmanager
def serve_upstream(upstream: ScriptedUpstream) -> Iterator[str]:
    """The scripted upstream on loopback; yields its origin."""
    config = uvicorn.Config(upstream, http="h11", lifespan="off", log_level="error", access_log=False)
    with serve_in_thread(uvicorn.Server(config)) as (port, _):
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def serve_proxy(upstream_origin: str) -> Iterator[str]:
    """The proxy as deployed (its app and server), in front of the upstream at `upstream_origin`.

    Its own retries are off: they are a feature (tests/proxy/upstream/test_upstream_retries.py), and with them a
    scripted 429 or 500 would reach the upstream three times through the proxy and once directly.
    """
    settings = Settings(
        upstream_url=f"{upstream_origin}/v1", retry_backoff=0.0, max_retries=0, shutdown_grace=1.0, log_level="warning"
    )
    app = create_app(settings, embedder=FakeEmbedder())
    with serve_in_thread(build_server(app, settings)) as (port, _):
        yield f"http://127.0.0.1:{port}"


@dataclass
class Verdict:
    """The result of one compared call."""

    name: str
    agreed: bool
    why: str = ""


@dataclass
class Compat:
    """Runs calls both ways and records a verdict per call in `verdicts` (the session's tally)."""

    upstream: ScriptedUpstream
    upstream_origin: str
    proxy_origin: str
    verdicts: list[Verdict] = field(default_factory=list)
    test_name: str = ""

    def check(
        self,
        replies: Reply | Iterable[Reply],
        call: Callable[[str], Any | Awaitable[Any]],
        *,
        raises: bool | None = None,
    ) -> None:
        """Make `call(base_url)` straight to the upstream and through the proxy, each against `replies`; fail
        the test with a diff when what either end saw differs.

        `call` returns what the application got as plain data (see `plain`), or raises; it may be a coroutine
        function, run on its own event loop. `raises` says whether the call straight to the upstream is meant to
        raise (default: when the last reply is an error status); when it does not behave so, the case itself
        is broken (two identical failures would otherwise count as agreement).
        """
        script = [replies] if isinstance(replies, Reply) else list(replies)
        direct = self._observe(self.upstream_origin, script, call)
        name = self.test_name
        broken = _broken(direct, script[-1].status >= 400 if raises is None else raises)
        if broken:
            self.verdicts.append(Verdict(name, False, f"broken case: {broken}"))
            pytest.fail(f"{name}: the case is broken, straight to the upstream {broken}", pytrace=False)
        proxied = self._observe(self.proxy_origin, script, call)
        difference = diff(direct, proxied)
        self.verdicts.append(Verdict(name, not difference, ", ".join(differences(direct, proxied))))
        if difference:
            pytest.fail(f"{name}: straight to the upstream and through the proxy differ\n{difference}", pytrace=False)

    def _observe(self, origin: str, script: list[Reply], call: Callable[[str], Any]) -> dict[str, Any]:
        self.upstream.play(script)
        try:
            result = call(f"{origin}/v1")
            if inspect.isawaitable(result):
                result = asyncio.run(_awaited(result))
            got: Any = {"returned": plain(result)}
        except Exception as error:
            got = {"raised": raised(error)}
        observed = {"upstream received": [vars(r) for r in self.upstream.received], "application got": got}
        seen: dict[str, Any] = shown(without_origin(observed, origin))
        return seen


def _broken(direct: dict[str, Any], raises: bool) -> str:
    """Why the direct observation is not what the case scripted, or ""."""
    if not direct["upstream received"]:
        return "the upstream received nothing"
    got = direct["application got"]
    if raises and "raised" not in got:
        return f"the call returned instead of raising: {json.dumps(got, default=repr)[:300]}"
    if not raises and "raised" in got:
        return f"the call raised: {json.dumps(got['raised'], default=repr)[:1500]}"
    return ""


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def only_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuses, for the rest of the test, any connection or name lookup that is not to 127.0.0.1 or localhost:
    a client that phones home (a price list, telemetry, a tokenizer download) fails loudly."""
    allowed = {"127.0.0.1", "localhost", "::1"}
    real_connect, real_connect_ex, real_getaddrinfo = (
        socket.socket.connect,
        socket.socket.connect_ex,
        socket.getaddrinfo,
    )

    def check(address: Any) -> None:
        if isinstance(address, tuple) and address and address[0] is not None and str(address[0]) not in allowed:
            raise ConnectionRefusedError(f"the compatibility suite is offline: refused a connection to {address}")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        check((host.decode() if isinstance(host, bytes) else host,))
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
