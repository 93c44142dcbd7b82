"""A run says how far it is from its first answer: requests answered of the total, the cached ones, the errors so
far and the time left, which is the estimate until an answer comes and then the estimate scaled by the answers' own
pace. A terminal gets one line redrawn in place; a log (stderr not a terminal) a line at the first answer, at each
tenth of the work or after a minute without one, and at the last, never one per answer."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextlift.eval import local_proxy
from contextlift.eval.progress import Progress
from contextlift.eval.timing import Speed
from contextlift.proxy.cli import main
from tests.eval.test_eval_says_its_time import small_run
from tests.fakes import completion
from tests.serving import fake_upstream_url, request_body


class FakeClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_first_answer_writes_a_line_with_the_count_the_errors_and_the_time_left() -> None:
    clock, log = FakeClock(), io.StringIO()
    progress = Progress(4, log, estimates=[10.0, 10.0, 10.0, 10.0], clock=clock)
    clock.now += 20
    progress.advance(0, cached=False, error=True)
    # 10 s of estimate took 20 s: the 30 s left take 60.
    assert log.getvalue() == "contextlift eval: 1 of 4 requests, errors 1, 20 s in, about 60 s left\n"


def test_the_time_left_is_the_estimate_until_an_answer_then_the_answers_pace() -> None:
    clock = FakeClock()
    progress = Progress(4, io.StringIO(), estimates=[0.0, 30.0, 60.0, 90.0], clock=clock)
    assert progress.seconds_left() == 180.0
    progress.advance(0, cached=True, error=False)  # the cache's answer takes no time and says nothing of the pace
    clock.now += 5
    assert progress.seconds_left() == 180.0
    clock.now += 10
    progress.advance(1, cached=False, error=False)  # 30 s of estimate in 15 s: the upstream is twice as fast
    assert progress.seconds_left() == pytest.approx(75.0)


def test_without_an_estimate_every_request_sent_weighs_alike() -> None:
    clock = FakeClock()
    progress = Progress(10, io.StringIO(), clock=clock)
    assert progress.seconds_left() is None
    progress.advance(0, cached=True, error=False)
    clock.now += 12
    progress.advance(1, cached=False, error=False)
    progress.advance(2, cached=False, error=False)
    assert progress.seconds_left() == pytest.approx(6.0 * 7)


def test_a_log_gets_a_line_a_tenth_or_a_minute_not_one_per_answer() -> None:
    clock, log = FakeClock(), io.StringIO()
    progress = Progress(1000, log, estimates=[1.0] * 1000, clock=clock)
    for job in range(1000):
        clock.now += 1.0
        progress.advance(job, cached=False, error=False)
    lines = log.getvalue().splitlines()
    # The first answer, a line a minute (1,000 s: 16) and a line a tenth (10) where a minute has not passed.
    assert 10 < len(lines) <= 1 + 16 + 10
    assert lines[0].startswith("contextlift eval: 1 of 1000 requests, errors 0, 1 s in, about ")
    assert lines[-1] == "contextlift eval: 1000 of 1000 requests, errors 0, 17 min in"
    assert "\r" not in log.getvalue()


def test_a_slow_log_still_gets_a_line_a_minute() -> None:
    clock, log = FakeClock(), io.StringIO()
    progress = Progress(1000, log, clock=clock)
    progress.advance(0, cached=False, error=False)
    for job in range(1, 6):
        clock.now += 61
        progress.advance(job, cached=False, error=False)
    assert len(log.getvalue().splitlines()) == 6


def test_a_terminal_gets_one_line_redrawn_in_place() -> None:
    clock, terminal = FakeClock(), Terminal()
    progress = Progress(3, terminal, estimates=[5.0, 5.0, 5.0], clock=clock)
    for job in range(3):
        clock.now += 5
        progress.advance(job, cached=False, error=job == 1)
    text = terminal.getvalue()
    assert text.count("\r") == 3
    assert text.count("\n") == 1
    assert text.endswith("\n")
    first, second, last = text.strip("\n").split("\r")[1:]
    assert first.startswith("[" + "#" * 10 + "." * 20 + "] 1/3 errors 0, 5 s in, about 10 s left")
    assert "2/3 errors 1" in second
    assert last.startswith("[" + "#" * 30 + "] 3/3 errors 1, 15 s in")


def test_an_ended_line_says_why() -> None:
    terminal = Terminal()
    progress = Progress(5, terminal, label="timing the upstream", left=False, clock=FakeClock())
    progress.advance(0, cached=False, error=False)
    progress.end("stopped at its bound")
    assert terminal.getvalue().endswith("\ncontextlift eval: timing the upstream: stopped at its bound\n")


COMPLETION = completion("Paris", prompt_tokens=40, completion_tokens=3)


def failing_first_upstream(sent: list[str]) -> Any:
    """A fake upstream that refuses its first chat completion (400) and answers every later one."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await request_body(receive)
        status, payload = 404, {}
        if scope["path"].endswith("/models"):
            status, payload = 200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
        elif scope["path"].endswith("/chat/completions"):
            sent.append(scope["path"])
            refused = {"error": {"message": "no", "type": "invalid_request_error"}}
            status, payload = (400, refused) if len(sent) == 1 else (200, COMPLETION)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": json.dumps(payload).encode()})

    return app


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[str]]]:
    sent: list[str] = []
    with fake_upstream_url(failing_first_upstream(sent)) as url:
        yield url, sent


def test_a_run_writes_its_progress_from_its_first_answer(
    upstream: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, sent = upstream
    # A speed known beforehand, as an embedded model's: no request is sent to time the upstream before the run's own.
    monkeypatch.setattr(local_proxy, "embedded_speed", lambda _: Speed.known(1000.0, 100.0, "known here"))
    argv = small_run(url, tmp_path / "r", "0%,100%", "none", "reorder")
    capsys.readouterr()
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if re.match(r"contextlift eval: \d+ of ", line)]
    total = len(sent)
    assert lines[0].startswith(f"contextlift eval: 1 of {total} requests, errors 1, ")
    assert lines[0].endswith(" left")
    assert lines[-1].startswith(f"contextlift eval: {total} of {total} requests, errors 1, ")
    assert len(lines) <= 11
