"""The compatibility suite's fixtures: one scripted upstream and one proxy in front of it for the session, the
`compat` checker, a loopback-only guard on every test, and the tally printed at the end of the run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.contract.compat_harness import Compat, ScriptedUpstream, Verdict, only_loopback, serve_proxy, serve_upstream

# litellm fetches its model price list from GitHub at import unless told to use the copy it ships.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# LangChain and LlamaIndex send traces or telemetry only when asked; make sure nobody asks.
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

VERDICTS = pytest.StashKey[list[Verdict]]()


@pytest.fixture(scope="session")
def scripted_upstream() -> ScriptedUpstream:
    return ScriptedUpstream()


@pytest.fixture(scope="session")
def origins(scripted_upstream: ScriptedUpstream) -> Iterator[tuple[str, str]]:
    """The scripted upstream's origin and the proxy's, both served on loopback for the whole session."""
    with serve_upstream(scripted_upstream) as upstream, serve_proxy(upstream) as proxy:
        yield upstream, proxy


@pytest.fixture
def compat(request: pytest.FixtureRequest, scripted_upstream: ScriptedUpstream, origins: tuple[str, str]) -> Compat:
    verdicts = request.config.stash.setdefault(VERDICTS, [])
    upstream, proxy = origins
    module = request.node.path.stem.removeprefix("test_compat_")
    return Compat(scripted_upstream, upstream, proxy, verdicts, test_name=f"{module}::{request.node.name}")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    only_loopback(monkeypatch)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    verdicts = config.stash.get(VERDICTS, [])
    if not verdicts:
        return
    agreed = sum(v.agreed for v in verdicts)
    terminalreporter.section("compatibility")
    terminalreporter.write_line(f"compatibility: {agreed}/{len(verdicts)} calls agree")
    for verdict in verdicts:
        if not verdict.agreed:
            terminalreporter.write_line(f"  differs: {verdict.name}: {verdict.why}")
