from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import openai
import psutil
import pytest

from tests.e2e.local_serving import serving


@pytest.fixture(scope="session")
def proxy_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The proxy in front of the embedded model, for the whole session."""
    with serving(tmp_path_factory.mktemp("e2e") / "serve.log") as url:
        yield url


@pytest.fixture
def sdk(proxy_url: str) -> Iterator[openai.OpenAI]:
    """The openai SDK pointed at the session's proxy, closed when the test ends."""
    with openai.OpenAI(base_url=f"{proxy_url}/v1", api_key="x", max_retries=0, timeout=300) as client:
        yield client


@pytest.fixture(autouse=True)
def _connections_to_the_proxy_closed(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the session's proxy has closed its connections to it when it ends. The proxy outlives the
    test, so a client left open keeps its socket until a garbage collection, at some later test, finds it; with
    warnings as errors that test, or the run at exit, then fails on the ResourceWarning (it did, now and then)."""
    if "proxy_url" not in request.fixturenames:
        yield
        return
    port = urlsplit(request.getfixturevalue("proxy_url")).port

    def open_to_the_proxy() -> set[tuple[str, int]]:
        return {c.laddr for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port}

    before = open_to_the_proxy()
    yield
    left = open_to_the_proxy() - before
    assert not left, f"the test left {len(left)} connection(s) to the proxy open (from {sorted(left)}): close them"
