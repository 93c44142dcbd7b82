"""Where one pass-through request's time goes, stage by stage: the proxy runs in this process with a mark
(`time.perf_counter()`) set as each stage begins, a fake upstream (bench.py's) answers on another core, and a
client process sends small chat requests one at a time. Printed at the end: the median time between
consecutive marks over the requests after a warm-up.

    .venv/bin/python scripts/request_stages.py            # 2,000 requests, about a minute
    .venv/bin/python scripts/request_stages.py --requests 300

The marks wrap internals by name (the server protocol, the app, its middleware, the upstream client), so this
is a diagnostic of the code as it stands, not a benchmark: the figures are what led to the cuts in
docs/performance.md, and `scripts/bench.py` is what measures them against another build or gateway. Two
stages include waits that are not the proxy's work: the request body's arrival (a client may write it apart from
the head) and the upstream's answer.
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from contextlift.proxy.local_model import free_port  # noqa: E402

WARM_UP = 200
_MARKS = 14
"""Marks a request passes (00 to 14): a request missing one (an error, another route) is not counted."""
_now = time.perf_counter
_marks: dict[str, float] = {}
_requests: list[dict[str, float]] = []

CLIENT = """
import httpx, os, signal, sys, time
url, n = sys.argv[1], int(sys.argv[2])
body = {"model": "bench", "messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 8}
with httpx.Client() as client:
    for _ in range(600):
        try:
            if client.get(url.replace("/v1/chat/completions", "/startupz")).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    for _ in range(n):
        client.post(url, json=body).raise_for_status()
os.kill(os.getppid(), signal.SIGINT)
"""


def _wrap(owner: Any, name: str, before: str | None, after: str | None = None) -> None:
    """`owner.name` setting mark `before` as it is first called in a request and `after` as it first returns
    (awaited, for a coroutine): a layer entered more than once in a request keeps its first mark."""
    original: Callable[..., Any] = getattr(owner, name)
    code = getattr(original, "__code__", None)
    if code is not None and code.co_flags & 0x80:  # a coroutine function

        async def marked_async(*args: Any, **kwargs: Any) -> Any:
            if before:
                _marks.setdefault(before, _now())
            result = await original(*args, **kwargs)
            if after:
                _marks.setdefault(after, _now())
            return result

        setattr(owner, name, marked_async)
        return

    def marked(*args: Any, **kwargs: Any) -> Any:
        if before:
            _marks.setdefault(before, _now())
        result = original(*args, **kwargs)
        if after:
            _marks.setdefault(after, _now())
        return result

    setattr(owner, name, marked)


def _instrument() -> None:
    from uvicorn.protocols.http import h11_impl

    from contextlift.proxy import app as proxy_app
    from contextlift.proxy.edge import admission, connection
    from contextlift.proxy.routes import chat, exchange
    from contextlift.proxy.upstream import client, request

    received = connection.GuardedConnection.data_received

    def first_byte(self: Any, data: bytes) -> None:
        if not self._requests:
            _marks.clear()
            _marks["00 first byte in"] = _now()
        received(self, data)

    connection.GuardedConnection.data_received = first_byte  # type: ignore[method-assign]
    _wrap(proxy_app.ProxyApp, "__call__", "01 app called (head parsed)")
    _wrap(admission.AdmissionMiddleware, "__call__", "02 admission entered")
    _wrap(exchange.Exchange, "enter", "04 route entered (body read, routed)")
    _wrap(chat.Exchange, "upstream", "05 body parsed, checked, pipeline chosen", "06 the request's upstream made")
    _wrap(request.RequestUpstream, "_chat_call", "07 upstream call started", "08 the call's body and headers")
    _wrap(client.UpstreamClient, "fetch", "09 sent to the upstream client")
    _wrap(client.UpstreamClient, "_read_whole", "10 answer head in (upstream wait)", "11 answer body read")
    _wrap(request.RequestUpstream, "_complete", None, "12 answer parsed")
    sent = h11_impl.RequestResponseCycle.send

    async def answer(self: Any, message: Any) -> None:
        if message["type"] == "http.response.start":
            _marks["13 response head sent"] = _now()
        await sent(self, message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            _marks["14 last byte written"] = _now()
            if len(_marks) == _MARKS:
                _requests.append(dict(_marks))

    h11_impl.RequestResponseCycle.send = answer  # type: ignore[method-assign]


def _report() -> None:
    measured = _requests[WARM_UP:]
    if not measured:
        print("no complete request was marked", file=sys.stderr)
        return
    names = sorted(measured[0])
    print(f"\n{len(measured)} requests, median microseconds from the mark before:")
    for before, after in itertools.pairwise(names):
        print(f"  {after:<40} {statistics.median(r[after] - r[before] for r in measured) * 1e6:8.1f}")
    total = statistics.median(r[names[-1]] - r[names[0]] for r in measured)
    print(f"  {'first byte to last byte':<40} {total * 1e6:8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    fake_port, port = free_port(), free_port()
    bench = str(ROOT / "scripts" / "bench.py")
    fake = subprocess.Popen([sys.executable, bench, "--fake-upstream", str(fake_port), "0", "0.01"])
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    client = subprocess.Popen([sys.executable, "-c", CLIENT, url, str(args.requests + WARM_UP)])
    for helper in (fake, client):
        os.sched_setaffinity(helper.pid, {cores[-1]})
    os.sched_setaffinity(0, {cores[0]})
    atexit.register(_report)
    atexit.register(fake.terminate)
    _instrument()
    from contextlift.proxy.cli import main as cli

    return cli(["serve", "--upstream", f"http://127.0.0.1:{fake_port}/v1", "--port", str(port)])


if __name__ == "__main__":
    sys.exit(main())
