"""Whatever sits at the policy path is read as untrusted: a file nested past the parser, one too large, a FIFO, or
one whose text cannot be a header value is refused with the reason, the policy in force stays, the watcher lives
on (SIGHUP keeps reloading instead of ending the process), and the reading never holds the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from contextlift.proxy.app import _watch_policy
from contextlift.proxy.policy import PolicyError, load_policy
from contextlift.proxy.settings import Settings
from contextlift.proxy.state import ProxyState
from contextlift.strategies import Pipeline, build_registry
from tests.fakes import FakeUpstream
from tests.proxy.auto.test_auto_policy import BODY, policy_text, rule, written

DEEP = "x = " + "[" * 3000 + "]" * 3000 + "\n"
"""Valid TOML that `tomllib` cannot parse without passing Python's recursion limit."""


def no_pipeline(text: str, param: str) -> Pipeline:
    return Pipeline()


def loads_within(path: Path, seconds: float, **bounds: Any) -> BaseException | None:
    """`load_policy(path)` in a thread: what it raised, or a failure if it did not return within `seconds`."""
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_policy(path, no_pipeline, **bounds)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"load_policy({path.name}) did not return within {seconds} s"
    return outcome[0]


def test_a_policy_nested_past_the_parser_is_refused_with_the_reason(tmp_path: Path) -> None:
    error = loads_within(written(tmp_path, DEEP), 30)
    assert isinstance(error, PolicyError)
    assert "nested too deep" in str(error)


def test_a_fifo_at_the_policy_path_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.toml"
    os.mkfifo(fifo)
    error = loads_within(fifo, 5)  # without O_NONBLOCK, opening it waits for a writer that never comes
    assert isinstance(error, PolicyError)
    assert "not a regular file" in str(error)


def test_a_policy_past_its_size_bound_is_refused(tmp_path: Path) -> None:
    path = written(tmp_path, policy_text(rule("big")) + "#" * 300_000 + "\n")
    error = loads_within(path, 10, max_bytes=64 * 1024)
    assert isinstance(error, PolicyError)
    assert "policy_max_bytes" in str(error)
    assert loads_within(path, 10, max_bytes=1024 * 1024) is None


def test_evidence_that_cannot_be_a_header_value_is_refused_naming_the_field(tmp_path: Path) -> None:
    for text in ("litm \u2014 reorder", "line\r\nx-injected: 1"):
        evidence = f'evidence = {{ id = "{text.encode("unicode_escape").decode()}", lift = 0.1, ci95 = [0.0, 0.2], '
        evidence += 'n = 9, report = "r", date = "d" }'
        path = written(tmp_path, f'version = 1\n[[rule]]\nid = "r"\nstrategy = "reorder"\n{evidence}\n')
        with pytest.raises(PolicyError, match=r"evidence\.id"):
            load_policy(path, no_pipeline)


def test_a_policy_file_name_past_latin_1_is_sent_percent_encoded(
    make_client: Any, fake: FakeUpstream, tmp_path: Path
) -> None:
    path = written(tmp_path, policy_text(rule("elsewhere", model="other-*")), name="policy\u2014v2.toml")
    client = make_client(policy_file=str(path))
    response = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "auto"})
    assert response.status_code == 200, response.text
    assert response.headers["x-context-policy"].endswith("policy=policy%E2%80%94v2.toml")


async def wait_for(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def refused(state: ProxyState) -> float:
    return state.metrics.policy_reloads.labels("refused")._value.get()  # type: ignore[no-any-return]


async def test_sighup_keeps_reloading_after_a_file_the_parser_cannot_read(tmp_path: Path) -> None:
    path = written(tmp_path, policy_text(rule("first", "none")))
    state = ProxyState(
        Settings(policy_file=str(path), policy_poll_seconds=60), build_registry(), upstream=cast(Any, None)
    )
    state.reload_policy()
    watcher = asyncio.create_task(_watch_policy(state))
    try:
        await asyncio.sleep(0.1)
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, None), "the watcher installed no handler"
        path.write_text(DEEP)
        os.kill(os.getpid(), signal.SIGHUP)
        await wait_for(lambda: refused(state) >= 1 or watcher.done(), 30, "the deep file was not read")
        assert not watcher.done(), "the watcher ended on the deep file"
        assert [r.id for r, _ in state.policy.rules] == ["first"]
        # Still the watcher's handler: with the default one, this SIGHUP would end the process (exit 129).
        assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, None)
        path.write_text(policy_text(rule("second", "none")))
        os.kill(os.getpid(), signal.SIGHUP)
        await wait_for(lambda: [r.id for r, _ in state.policy.rules] == ["second"], 10, "SIGHUP did not reload")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


async def test_a_reload_never_holds_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = written(tmp_path, policy_text(rule("first", "none")))
    state = ProxyState(
        Settings(policy_file=str(path), policy_poll_seconds=0.05), build_registry(), upstream=cast(Any, None)
    )
    reading = threading.Event()

    def slow_load(*args: Any) -> Any:  # a 12 MB file took 4.5 s to parse
        reading.set()
        time.sleep(1.5)
        raise PolicyError("slow and bad")

    monkeypatch.setattr("contextlift.proxy.state.load_policy", slow_load)
    gaps = [0.0]

    async def heartbeat() -> None:  # what /healthz needs: the loop turning every few milliseconds
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps[0] = max(gaps[0], now - last)
            last = now

    watcher = asyncio.create_task(_watch_policy(state))
    beating = asyncio.create_task(heartbeat())
    try:
        await asyncio.sleep(0.1)
        path.write_text(policy_text(rule("second", "none")))
        os.utime(path, (time.time() + 5, time.time() + 5))
        await wait_for(lambda: refused(state) >= 1, 10, "the slow reload did not finish")
        assert reading.is_set()
        assert gaps[0] < 0.5, f"the event loop stood still {gaps[0]:.2f} s while the policy was read"
    finally:
        for task in (watcher, beating):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize("value", ["none:ambiguous-chunks", "none: ambiguous chunks", "LITM", "paragraph"])
def test_a_format_no_request_could_have_is_refused_naming_the_rule(tmp_path: Path, value: str) -> None:
    # Left through, the rule would never match: a typo would switch it off without a word.
    path = written(tmp_path, policy_text(rule("typo", formats=[value])))
    with pytest.raises(PolicyError, match=r"rule 'typo': formats .* never match a request"):
        load_policy(path, no_pipeline)


def test_every_format_and_declined_reading_a_request_can_have_loads(tmp_path: Path) -> None:
    named = ["none", "litm", "paragraphs", "declared", "none: ambiguous-chunks", "none: unrecognised-documents-field"]
    assert load_policy(written(tmp_path, policy_text(rule("ok", formats=named))), no_pipeline).rules
