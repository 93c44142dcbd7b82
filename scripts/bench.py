"""The proxy's own costs, side by side in one run, on loopback: a fast fake upstream (a fixed delay, streaming
when asked) in its own process, `contextlift serve` in front of it pinned to one core, and the load from a
third process. Printed as one table (and `--json`):

- added latency at 1 in flight, p50/p99: each request sent straight to the fake and through the proxy in turn
  (a small body and a 20-document body), the difference per pair;
- throughput through the proxy per proxy core at 16, 64 and 256 in flight, with p50/p99: three rounds per cell,
  interleaved across the targets, the median round shown with the range of the three (a shared machine's speed
  drifts by a third between minutes; one round per cell ranked the same two proxies both ways in one day);
- streaming: time to first chunk and spacing between chunks, direct and through the proxy;
- each strategy's wall time against `none` at a fixed upstream delay (20 documents);
- `reorder`'s CPU time in the proxy process per request, cold (documents never seen) and warm (cached), and
  cold with each in-process ranker (minilm, client, lexical, fusion) beside `none` on fresh bodies;
- the proxy's resident memory idle (MiniLM not loaded: the first request that needs it, the strategies' warm-up,
  loads it) and after the run, and its start-up time to /healthz and /startupz;
- with `--peer [NAME=]URL` (repeatable: another gateway, started first and pointed at `http://127.0.0.1:PORT/v1`
  with the port given as `--fake-port PORT`), its added latency and throughput in the same run, interleaved with
  the proxy's;
- with `--variant NAME:VAR=VALUE,...` (repeatable), another `contextlift serve` on the same core with those
  environment settings, measured beside the default one (pool sizes, the event loop, ...);
- with `--startup ROUNDS`, only start-up: the default proxy and each variant spawned ROUNDS times in turn, one at
  a time on the one core, each timed from spawn to /startupz and its resident memory read a second later; and
  what each spent importing until /startupz answered (`python -X importtime`), by package, median of the rounds.

- with `--cpu ROUNDS`, only the proxy process's CPU per pass-through request (small body, one in flight): the
  default proxy and each variant on the one core, each request to the next of them in turn, ROUNDS requests
  each, three times. Interleaved so, every request finds the caches cold from the others' (as a peer on the core
  leaves them); a build's latency at this scale is within the machine's drift, its CPU per request is not.

The load for throughput comes from wrk (Debian's `wrk` package) when it is on the PATH: a load generator in
Python on the same core as the fake upstream saturates before the proxy does (httpx managed 206 req/s at 64 in
flight straight to the fake). Without wrk the figures are labelled as the Python generator's.

    .venv/bin/python scripts/bench.py                 # about 3 minutes on 2 cores
    .venv/bin/python scripts/bench.py --quick         # seconds: a smoke run (the test suite runs it)
    .venv/bin/python scripts/bench.py --startup 5 --variant light:CONTEXTLIFT_EMBEDDER=off
    .venv/bin/python scripts/bench.py --cpu 3000 --variant before:PYTHONPATH=/path/with/another/contextlift
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from contextlift.proxy.local_model import free_port

ROOT = Path(__file__).resolve().parents[1]
SMALL: dict[str, Any] = {
    "model": "bench",
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
    "max_tokens": 8,
}
DOCS = "\n".join(
    f"Document [{i}](Title: Town {i}) Town {i} sits on river {i % 7} and trades wool, copper and salt with its "
    f"neighbours; its market opens on day {i % 5} of the week and its bridge has {i % 9 + 1} arches."
    for i in range(1, 21)
)
TWENTY_PROMPT = f"Answer from the documents.\n\n{DOCS}\n\nQuestion: which town has 4 arches?"
TWENTY: dict[str, Any] = {"model": "bench", "messages": [{"role": "user", "content": TWENTY_PROMPT}], "max_tokens": 8}
STRATEGIES = ["none", "reorder", "query-aware", "filter, reorder", "recite", "medoid; k=3"]


# --- the fake upstream (run as its own process: `bench.py --fake-upstream PORT DELAY`) ---------------------------


def _completion(text: str) -> bytes:
    return json.dumps({
        "id": "bench", "object": "chat.completion", "created": 0, "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }).encode()  # fmt: skip


def _chunk(text: str, finish: str | None = None) -> bytes:
    body = {"id": "bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}  # fmt: skip
    return f"data: {json.dumps(body)}\n\n".encode()


def fake_upstream(delay: float, chunk_gap: float) -> Callable[..., Awaitable[None]]:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"].endswith("/models"):
            head = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            await send(head)
            await send({"type": "http.response.body", "body": b'{"object": "list", "data": [{"id": "bench"}]}'})
            return
        # Request headers may ask for another delay (the strategy table sets one): x-bench-delay seconds.
        wanted = dict(scope["headers"]).get(b"x-bench-delay")
        await asyncio.sleep(float(wanted) if wanted else delay)
        if b'"stream":true' not in raw.replace(b" ", b""):
            head = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            await send(head)
            await send({"type": "http.response.body", "body": _completion("Town 3 has 4 arches.")})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for word in ["Town", " 3", " has", " 4", " arches", "."]:
            await send({"type": "http.response.body", "body": _chunk(word), "more_body": True})
            await asyncio.sleep(chunk_gap)
        await send({"type": "http.response.body", "body": _chunk("", "stop") + b"data: [DONE]\n\n"})

    return app


def _serve_fake(port: int, delay: float, chunk_gap: float) -> None:
    import uvicorn

    uvicorn.run(fake_upstream(delay, chunk_gap), host="127.0.0.1", port=port, log_level="error", access_log=False)


# --- processes -------------------------------------------------------------------------------------------------------


def _wait(url: str, timeout: float = 180.0) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` so far, in nanoseconds (the scheduler's own count; /proc's stat counts
    10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total


def host_speed(core: set[int]) -> float:
    """ns a fixed pure-Python step takes on `core`, best of five: the host's speed in this run. A shared host ran
    it 57 ns at one hour and 84 the next, and every latency in ms with it: compare runs by this figure (or by the
    ratio to a peer measured in the same run), not across hosts' moods."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, core)
    try:
        return min(timeit.repeat("sum((1, 2, 3))", number=200_000, repeat=5)) / 200_000 * 1e9
    finally:
        os.sched_setaffinity(0, before)


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) / 1024


# --- measurements ------------------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def _timed(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str], told: list[float] | None = None
) -> float:
    started = time.perf_counter()
    response = await client.post(url, json=body, headers=headers)
    response.raise_for_status()
    elapsed = time.perf_counter() - started
    if told is not None and "x-context-overhead-ms" in response.headers:
        told.append(float(response.headers["x-context-overhead-ms"]))
    return elapsed


async def added_latency(
    targets: dict[str, str], direct: str, body: dict[str, Any], rounds: int, idle: float = 0.0
) -> dict[str, Any]:
    """Each target and the fake itself in turn, one request at a time; the added time per pair, in ms. With
    `idle`, each request of a pair comes that many seconds after the last one ended, as a stream's next chunk
    does: on this project's 2-core VM a proxy idle 10 ms between requests took 1.0 ms from a
    request's first byte to its upstream call, one kept busy 0.4 ms, whichever the route."""
    added: dict[str, list[float]] = {name: [] for name in targets}
    told: dict[str, list[float]] = {name: [] for name in targets}  # what X-Context-Overhead-Ms said
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(3):  # warm connections and caches
            for url in [direct, *targets.values()]:
                await _timed(client, f"{url}/chat/completions", body, {})
        names = list(targets)
        for round_ in range(rounds):
            # Each target's request right after one straight to the fake, the targets' order turning each round:
            # with one direct request per round, the second target's pairs measured ~2 ms more than the first's
            # on a loaded machine, whichever target came second.
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                await asyncio.sleep(idle)
                base = await _timed(client, f"{direct}/chat/completions", body, {})
                await asyncio.sleep(idle)
                through = await _timed(client, f"{targets[name]}/chat/completions", body, {}, told[name])
                added[name].append((through - base) * 1000)
    return {
        name: {"p50_ms": _pct(v, 50), "p99_ms": _pct(v, 99), "n": len(v), "header_p50_ms": _pct(told[name], 50)}
        for name, v in added.items()
    }


_WRK_SCRIPT = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[%s]]
"""
THROUGHPUT_ROUNDS = 3
_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def wrk_throughput(url: str, concurrency: int, seconds: float, wrk: str) -> dict[str, Any]:
    """`throughput` measured by wrk: one thread, `concurrency` connections, each a request at a time."""
    script = Path(os.environ.get("TMPDIR", "/tmp")) / f"contextlift-bench-{os.getpid()}.lua"
    script.write_text(_WRK_SCRIPT % json.dumps(SMALL))
    try:
        out = subprocess.run(
            [wrk, "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--latency", "--timeout", "60s",
             "-s", str(script), f"{url}/chat/completions"],
            capture_output=True, text=True, check=True, timeout=seconds + 90,
        ).stdout  # fmt: skip
    finally:
        script.unlink(missing_ok=True)

    def latency(percent: str) -> float:
        match = re.search(rf"^\s*{percent}%\s+([\d.]+)(us|ms|s)\s*$", out, re.MULTILINE)
        return float(match.group(1)) * _UNITS[match.group(2)] if match else float("nan")

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    failed = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(failed.group(1)) if failed else 0) + (sum(map(int, sockets.groups())) if sockets else 0)
    return {"rps": float(rps.group(1)) if rps else 0.0, "p50_ms": latency("50"), "p99_ms": latency("99"),
            "errors": errors}  # fmt: skip


def _busy_share(cores: set[int], interval: float = 0.2) -> float:
    """The share of `interval` that `cores` spent busy (from /proc/stat; 0 where there is none)."""

    def ticks() -> tuple[int, int]:
        busy = total = 0
        try:
            lines = Path("/proc/stat").read_text().splitlines()
        except OSError:
            return 0, 0
        for line in lines:
            name, *values = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
                numbers = [int(v) for v in values[:8]]
                idle = numbers[3] + numbers[4]
                busy, total = busy + sum(numbers) - idle, total + sum(numbers)
        return busy, total

    busy_before, total_before = ticks()
    time.sleep(interval)
    busy_after, total_after = ticks()
    return (busy_after - busy_before) / max(1, total_after - total_before)


def settle(cores: set[int], limit: float = 10.0) -> None:
    """Wait until the proxies' core is idle again (at most `limit` s): a gateway still working through the
    requests a load run left in flight (a peer at 256 in flight keeps its core busy for seconds after wrk stops)
    would otherwise be charged to the next target's run."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and _busy_share(cores) > 0.1:
        pass


def load(url: str, concurrency: int, seconds: float) -> dict[str, Any]:
    """Throughput at `concurrency` in flight: wrk when installed, else the Python generator."""
    wrk = shutil.which("wrk")
    if wrk:
        return wrk_throughput(url, concurrency, seconds, wrk)
    return asyncio.run(throughput(url, concurrency, seconds))


async def throughput(url: str, concurrency: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                try:
                    latencies.append(await _timed(client, f"{url}/chat/completions", SMALL, {}))
                except httpx.HTTPError:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": _pct(latencies, 50) * 1000,
        "p99_ms": _pct(latencies, 99) * 1000,
        "errors": errors,
    }


async def streaming(urls: dict[str, str], rounds: int) -> dict[str, dict[str, Any]]:
    """Time to the first chunk and spacing between chunks, per URL, one stream at a time, the URLs in turn."""
    first: dict[str, list[float]] = {name: [] for name in urls}
    gaps: dict[str, list[float]] = {name: [] for name in urls}
    body = {**SMALL, "stream": True}
    async with httpx.AsyncClient(timeout=30) as client:
        for _ in range(rounds):
            for name, url in urls.items():
                started = time.perf_counter()
                last = None
                async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data: {"):
                            continue
                        now = time.perf_counter()
                        if last is None:
                            first[name].append((now - started) * 1000)
                        else:
                            gaps[name].append((now - last) * 1000)
                        last = now
    return {
        name: {"ttft_p50_ms": _pct(first[name], 50), "ttft_p99_ms": _pct(first[name], 99),
               "gap_p50_ms": _pct(gaps[name], 50)}
        for name in urls
    }  # fmt: skip


async def strategies(url: str, delay: float, rounds: int) -> dict[str, Any]:
    """Wall time per strategy on the 20-document body, the upstream answering after `delay` seconds."""
    headers = {"x-bench-delay": str(delay)}
    rows: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    async with httpx.AsyncClient(timeout=120) as client:
        for strategy in STRATEGIES:  # warm: the embedder's cache holds these documents after this
            await _timed(client, f"{url}/chat/completions", TWENTY, {**headers, "x-context-strategy": strategy})
        for _ in range(rounds):
            for strategy in STRATEGIES:
                asked = {**headers, "x-context-strategy": strategy}
                wall = await _timed(client, f"{url}/chat/completions", TWENTY, asked)
                rows[strategy].append(wall * 1000)
    base = statistics.median(rows["none"])
    return {s: {"p50_ms": statistics.median(v), "vs_none": statistics.median(v) / base} for s, v in rows.items()}


RANKERS = ("minilm", "client", "lexical", "fusion")


async def reorder_cpu(url: str, pid: int, rounds: int) -> dict[str, Any]:
    """The proxy process's CPU seconds per `reorder` request: cold (documents it never saw), then warm (again),
    with the default ranker (lexical); then cold with each ranker (`rankers`), and `none` on the same bodies."""

    def fresh(tag: str) -> list[dict[str, Any]]:
        return [
            {**TWENTY, "messages": [{"role": "user", "content": TWENTY_PROMPT.replace("Town", f"Burg{tag}{n}x")}]}
            for n in range(rounds)
        ]

    async def cpu_ms(
        client: httpx.AsyncClient, bodies: list[dict[str, Any]], headers: dict[str, str]
    ) -> dict[str, float]:
        before = _cpu_seconds(pid)
        started = time.perf_counter()
        for body in bodies:
            await _timed(client, f"{url}/chat/completions", body, headers)
        return {
            "cpu_ms": (_cpu_seconds(pid) - before) / rounds * 1000,
            "wall_ms": (time.perf_counter() - started) / rounds * 1000,
        }

    bodies = fresh("")
    figures: dict[str, Any] = {"rankers": {}}
    async with httpx.AsyncClient(timeout=120) as client:
        # The embedder loads when a request first needs it: loaded here, outside every measurement.
        warm = {"x-context-strategy": "reorder; ranker=minilm", "x-bench-delay": "0"}
        await _timed(client, f"{url}/chat/completions", fresh("warm-up")[0], warm)
        for label in ("cold", "warm"):
            figures[label] = await cpu_ms(client, bodies, {"x-context-strategy": "reorder", "x-bench-delay": "0"})
        figures["none"] = await cpu_ms(client, fresh("none"), {"x-bench-delay": "0"})
        for ranker in RANKERS:
            asked = {"x-context-strategy": f"reorder; ranker={ranker}", "x-bench-delay": "0"}
            figures["rankers"][ranker] = await cpu_ms(client, fresh(ranker), asked)
    return figures


# --- the run --------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument(
        "--peer", action="append", default=[], metavar="[NAME=]URL",
        help="another gateway's OpenAI base URL, pointed at the fake upstream (repeatable; NAME labels its column)",
    )  # fmt: skip
    parser.add_argument("--delay", type=float, default=0.0, help="the fake upstream's answer delay (s)")
    parser.add_argument(
        "--fake-port", type=int, help="the fake upstream's port (default: a free one), so a --peer can be started first"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--rankers-only", type=int, metavar="ROUNDS",
        help="measure only a cold reorder's proxy CPU per ranker beside none, over ROUNDS fresh bodies each",
    )  # fmt: skip
    parser.add_argument(
        "--variant", action="append", default=[], metavar="NAME:VAR=VALUE,...",
        help="another proxy with these environment settings, measured beside the default (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--startup", type=int, metavar="ROUNDS",
        help="measure only spawn to /startupz and idle RSS, ROUNDS spawns of the default proxy and each variant",
    )  # fmt: skip
    parser.add_argument(
        "--cpu", type=int, metavar="ROUNDS",
        help="measure only the proxy's CPU per pass-through request, the default proxy and each variant interleaved",
    )  # fmt: skip
    parser.add_argument("--fake-upstream", nargs=3, metavar=("PORT", "DELAY", "GAP"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--install-sizes", action="store_true",
        help="only install the core and each extra into fresh venvs and print their sizes and install times",
    )  # fmt: skip
    args = parser.parse_args()
    if args.install_sizes:
        print("\n".join(install_sizes()))
        return 0
    if args.fake_upstream:
        _serve_fake(int(args.fake_upstream[0]), float(args.fake_upstream[1]), float(args.fake_upstream[2]))
        return 0
    seconds, rounds = (0.5, 3) if args.quick else (8.0, 200)
    cores = sorted(os.sched_getaffinity(0))
    proxy_core, rest = {cores[0]}, set(cores[1:]) or {cores[0]}
    fake_port, proxy_port = args.fake_port or free_port(), free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CONTEXTLIFT_LOG_LEVEL": "warning", "CONTEXTLIFT_MAX_IN_FLIGHT": "512"}
    fake = subprocess.Popen([sys.executable, __file__, "--fake-upstream", str(fake_port), str(args.delay), "0.01"])
    os.sched_setaffinity(fake.pid, rest)
    started = time.perf_counter()

    def serve(port: int, extra: dict[str, str], stderr: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        python = [sys.executable, "-X", "importtime"] if stderr is not subprocess.DEVNULL else [sys.executable]
        process = subprocess.Popen(
            [*python, "-m", "contextlift.proxy.cli", "serve", "--upstream", f"http://127.0.0.1:{fake_port}/v1",
             "--port", str(port)],
            cwd=ROOT, env={**env, **extra}, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
        os.sched_setaffinity(process.pid, proxy_core)
        return process

    def measured_alone(measure: Callable[[], Any], lines: Callable[[Any], list[str]], key: str) -> int:
        """A mode that measures only `measure` (spawning its own proxies), the fake upstream its only company."""
        os.sched_setaffinity(0, rest)
        try:
            _wait(f"http://127.0.0.1:{fake_port}/v1/models")
            figures = measure()
        finally:
            fake.terminate()
            fake.wait(timeout=30)
        print("\n".join(lines(figures)))
        if args.json:
            args.json.write_text(json.dumps({key: figures}, indent=1) + "\n")
        return 0

    if args.startup:
        return measured_alone(
            lambda: startup_rounds(serve, args.startup, args.variant),
            lambda startup: [*startup_lines(startup), "", *import_lines(startup)],
            "startup",
        )
    if args.cpu:
        return measured_alone(lambda: cpu_rounds(serve, args.cpu, args.variant), cpu_lines, "cpu_per_request")
    proxy = serve(proxy_port, {})
    os.sched_setaffinity(0, rest)
    direct, through = f"http://127.0.0.1:{fake_port}/v1", f"http://127.0.0.1:{proxy_port}/v1"
    variants: dict[str, str] = {}
    processes = [proxy, fake]
    try:
        figures: dict[str, Any] = {
            "machine": {"cpus": os.cpu_count(), "proxy_core": sorted(proxy_core), "step_ns": host_speed(proxy_core)}
        }
        _wait(f"http://127.0.0.1:{fake_port}/v1/models")
        healthz = _wait(f"http://127.0.0.1:{proxy_port}/healthz")
        startupz = _wait(f"http://127.0.0.1:{proxy_port}/startupz")
        figures["startup_s"] = {"healthz": healthz, "startupz": startupz, "since_spawn": time.perf_counter() - started}
        figures["rss_mib_idle"] = _rss_mib(proxy.pid)
        figures["variant_startup"] = {}
        for spec in args.variant:
            name, _, settings = spec.partition(":")
            port = free_port()
            spawned = time.perf_counter()
            variant = serve(port, dict(pair.split("=", 1) for pair in settings.split(",") if pair))
            processes.append(variant)
            ready = _wait(f"http://127.0.0.1:{port}/startupz")
            figures["variant_startup"][name] = {
                "startupz": ready,
                "since_spawn": time.perf_counter() - spawned,
                "rss_mib_idle": _rss_mib(variant.pid),
            }
            variants[name] = f"http://127.0.0.1:{port}/v1"
        if args.rankers_only:
            figures["reorder_cpu"] = asyncio.run(reorder_cpu(through, proxy.pid, args.rankers_only))
            print("\n".join(ranker_lines(figures["reorder_cpu"], args.rankers_only)))
            if args.json:
                args.json.write_text(json.dumps(figures, indent=1) + "\n")
            return 0
        targets = {"contextlift": through, **variants, **peers(args.peer)}
        figures["targets"] = list(targets)
        figures["load_generator"] = "wrk" if shutil.which("wrk") else "python-httpx"
        figures["added_small"] = asyncio.run(added_latency(targets, direct, SMALL, rounds))
        figures["added_20_docs"] = asyncio.run(added_latency(targets, direct, TWENTY, rounds // 2))
        figures["added_small_idle"] = asyncio.run(added_latency(targets, direct, SMALL, rounds // 4 or 1, idle=0.01))
        # Interleaved: each concurrency for every target in turn, so drift on the machine hits all of them.
        figures["throughput"] = {name: {} for name in targets}
        for c in (16, 64, 256):
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
            for _ in range(THROUGHPUT_ROUNDS):
                for name, url in targets.items():
                    settle(proxy_core)
                    runs[name].append(load(url, c, seconds / THROUGHPUT_ROUNDS * 1.5))
            for name, measured in runs.items():
                median = sorted(measured, key=lambda run: run["rps"])[len(measured) // 2]
                figures["throughput"][name][c] = {
                    **median,
                    "rounds": measured,
                    "rounds_rps": [r["rps"] for r in measured],
                }
        figures["direct_throughput_64"] = load(direct, 64, seconds)
        figures["streaming"] = asyncio.run(streaming({"direct": direct, **targets}, rounds // 4 or 1))
        figures["strategies_at_200ms"] = asyncio.run(strategies(through, 0.2, 1 if args.quick else 5))
        figures["reorder_cpu"] = asyncio.run(reorder_cpu(through, proxy.pid, 3 if args.quick else 20))
        figures["rss_mib_after"] = _rss_mib(proxy.pid)
        figures["machine"]["step_ns_after"] = host_speed(proxy_core)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
    print(render(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


def startup_rounds(
    serve: Callable[..., subprocess.Popen[bytes]], rounds: int, variants: list[str]
) -> dict[str, dict[str, Any]]:
    """Spawn to /startupz and idle RSS (read a second after /startupz answered, once anything started in the
    background has had time to show), for the default proxy and each variant, interleaved round by round so that
    drift on the machine hits all of them; then, in as many rounds again, each one's import times until /startupz
    (`-X importtime` slows the start a little, so those rounds are timed apart)."""
    kinds: dict[str, dict[str, str]] = {"default": {}} | {
        name: dict(pair.split("=", 1) for pair in settings.split(",") if pair)
        for name, _, settings in (spec.partition(":") for spec in variants)
    }
    figures: dict[str, dict[str, Any]] = {name: {"startupz_s": [], "rss_mib_idle": [], "imports": []} for name in kinds}
    for _ in range(rounds):
        for name, extra in kinds.items():
            port = free_port()
            spawned = time.perf_counter()
            process = serve(port, extra)
            try:
                _wait(f"http://127.0.0.1:{port}/startupz")
                figures[name]["startupz_s"].append(time.perf_counter() - spawned)
                time.sleep(1.0)
                figures[name]["rss_mib_idle"].append(_rss_mib(process.pid))
            finally:
                process.terminate()
                process.wait(timeout=30)
    for _ in range(rounds):
        for name, extra in kinds.items():
            port = free_port()
            with tempfile.TemporaryFile() as stderr:
                process = serve(port, extra, stderr)
                try:
                    _wait(f"http://127.0.0.1:{port}/startupz")
                finally:
                    process.terminate()
                    process.wait(timeout=30)
                stderr.seek(0)
                figures[name]["imports"].append(import_times(stderr.read().decode(errors="replace")))
    return figures


def cpu_rounds(
    serve: Callable[..., subprocess.Popen[bytes]], rounds: int, variants: list[str]
) -> dict[str, list[float]]:
    """The default proxy's and each variant's CPU microseconds per small pass-through request, three times
    `rounds` requests each, every request to the next proxy in turn."""
    kinds = {"default": {}} | {
        name: dict(pair.split("=", 1) for pair in settings.split(",") if pair)
        for name, _, settings in (spec.partition(":") for spec in variants)
    }
    running: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for name, extra in kinds.items():
            port = free_port()
            running[name] = (serve(port, extra), f"http://127.0.0.1:{port}/v1/chat/completions")
            _wait(f"http://127.0.0.1:{port}/startupz")
        figures: dict[str, list[float]] = {name: [] for name in kinds}
        with httpx.Client(timeout=30) as client:
            for _ in range(100):  # warm connections and first-use paths
                for _, url in running.values():
                    client.post(url, json=SMALL).raise_for_status()
            for _ in range(3):
                before = {name: _cpu_ns(process.pid) for name, (process, _) in running.items()}
                for _ in range(rounds):
                    for _, url in running.values():
                        client.post(url, json=SMALL).raise_for_status()
                for name, (process, _) in running.items():
                    figures[name].append((_cpu_ns(process.pid) - before[name]) / rounds / 1000)
        return figures
    finally:
        for process, _ in running.values():
            process.terminate()
            process.wait(timeout=30)


def cpu_lines(figures: dict[str, list[float]]) -> list[str]:
    lines = ["| proxy | CPU per pass-through request, us (three runs) |", "|---|---|"]
    for name, runs in figures.items():
        lines.append(f"| {name} | {' / '.join(f'{run:.0f}' for run in runs)} |")
    return lines


def peers(specs: list[str]) -> dict[str, str]:
    """`--peer` values by column name: `NAME=URL`, or a bare URL named `peer` (`peer2`, ... after the first)."""
    named: dict[str, str] = {}
    for spec in specs:
        name, _, url = spec.partition("=") if "=" in spec.split("://", 1)[0] else ("", "", spec)
        named[name or (f"peer{len(named) + 1}" if named else "peer")] = url
    return named


def import_times(importtime: str) -> dict[str, float]:
    """Milliseconds of `-X importtime` self time per module, each module's own import and nothing it imported."""
    times: dict[str, float] = {}
    for line in importtime.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if match:
            times[match[2]] = times.get(match[2], 0.0) + int(match[1]) / 1000
    return times


def _package(module: str) -> str:
    """What a module's import time is told under: the project's sub-packages each, any other by its top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("proxy", "strategies", "eval") else parts[0]


def import_lines(figures: dict[str, dict[str, Any]], shown: int = 25) -> list[str]:
    """Import time until /startupz by package (self times summed, median of the rounds), the largest first."""
    by_kind: dict[str, dict[str, float]] = {}
    for name, f in figures.items():
        rounds = []
        for times in f["imports"]:
            packages: dict[str, float] = {}
            for module, ms in times.items():
                packages[_package(module)] = packages.get(_package(module), 0.0) + ms
            rounds.append(packages)
        names = {p for r in rounds for p in r}
        by_kind[name] = {p: statistics.median(r.get(p, 0.0) for r in rounds) for p in names}
        by_kind[name]["(all)"] = statistics.median(sum(r.values()) for r in rounds)
        by_kind[name]["(modules imported, count)"] = statistics.median(len(times) for times in f["imports"])
    kinds = list(by_kind)
    order = sorted({p for k in by_kind.values() for p in k if not p.startswith("(")},
                   key=lambda p: -max(k.get(p, 0.0) for k in by_kind.values()))  # fmt: skip
    lines = [
        "| imported until /startupz, ms (self, median) | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for package in ["(all)", "(modules imported, count)", *order[:shown]]:
        lines.append(f"| {package} | " + " | ".join(f"{by_kind[k].get(package, 0.0):.0f}" for k in kinds) + " |")
    return lines


def startup_lines(figures: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| proxy | spawn to /startupz, median [range], s | idle RSS, median [range], MiB |", "|---|---|---|"]
    for name, f in figures.items():
        t, m = f["startupz_s"], f["rss_mib_idle"]
        lines.append(
            f"| {name} | {statistics.median(t):.2f} [{min(t):.2f}-{max(t):.2f}] | "
            f"{statistics.median(m):.0f} [{min(m):.0f}-{max(m):.0f}] |"
        )
    return lines


def ranker_lines(r: dict[str, Any], rounds: int | None) -> list[str]:
    """The per-ranker table: each ranker's cold `reorder` beside `none` on fresh bodies of the same shape."""
    told = f", {rounds} fresh bodies each" if rounds else ""
    lines = [
        f"| ranker (reorder, 20 fresh documents{told}) | proxy CPU per request, ms | added over none, ms | wall, ms |",
        "|---|---|---|---|",
        f"| (none) | {r['none']['cpu_ms']:.1f} | | {r['none']['wall_ms']:.1f} |",
    ]
    for name, row in r["rankers"].items():
        added = row["cpu_ms"] - r["none"]["cpu_ms"]
        lines.append(f"| {name} | {row['cpu_ms']:.1f} | {added:+.1f} | {row['wall_ms']:.1f} |")
    return lines


def render(f: dict[str, Any]) -> str:
    names = f["targets"]
    lines = [
        f"machine: {f['machine']['cpus']} CPUs, the proxy pinned to core {f['machine']['proxy_core']}; load from "
        f"{f['load_generator']}",
        f"host speed: a fixed Python step on the proxy's core took {f['machine']['step_ns']:.1f} ns at the start, "
        f"{f['machine'].get('step_ns_after', float('nan')):.1f} at the end (`host_speed`: compare runs by it)",
        "",
    ]
    lines += ["| figure | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    rows = [("small body", "added_small"), ("20 documents", "added_20_docs"),
            ("small body, each request after 10 ms idle", "added_small_idle")]  # fmt: skip
    for label, key in rows:
        cells = [f"{f[key][n]['p50_ms']:.2f} / {f[key][n]['p99_ms']:.2f}" for n in names]
        lines.append(f"| added latency, {label}, p50 / p99 ms | " + " | ".join(cells) + " |")
        told = [f"{f[key][n]['header_p50_ms']:.2f}" for n in names]
        lines.append(f"| X-Context-Overhead-Ms said, {label}, p50 ms | " + " | ".join(told) + " |")
    for c in (16, 64, 256):
        cells = []
        for n in names:
            t = f["throughput"][n][c]
            spread = t.get("rounds_rps", [t["rps"]])
            cells.append(
                f"{t['rps']:.0f} req/s [{min(spread):.0f}-{max(spread):.0f}] (p50 {t['p50_ms']:.0f}, "
                f"p99 {t['p99_ms']:.0f} ms, errors {t['errors']})"
            )
        lines.append(f"| throughput at {c} in flight, per proxy core | " + " | ".join(cells) + " |")
    ceiling = f["direct_throughput_64"]["rps"]
    lines += ["", f"the fake upstream alone at 64 in flight: {ceiling:.0f} req/s (the load generator's ceiling)", ""]
    direct = f["streaming"]["direct"]
    lines.append(f"streaming: first chunk p50 {direct['ttft_p50_ms']:.2f} ms direct; chunk spacing p50 "
                 f"{direct['gap_p50_ms']:.2f} ms direct")  # fmt: skip
    for name in names:
        through = f["streaming"].get(name)
        if through is not None:
            lines.append(
                f"streaming through {name}: first chunk p50 {through['ttft_p50_ms']:.2f} ms (added "
                f"{through['ttft_p50_ms'] - direct['ttft_p50_ms']:.2f}), p99 {through['ttft_p99_ms']:.2f} ms; "
                f"chunk spacing p50 {through['gap_p50_ms']:.2f} ms"
            )
    lines += ["", "| strategy (20 documents, upstream 200 ms) | wall p50 ms | x none |", "|---|---|---|"]
    for name, row in f["strategies_at_200ms"].items():
        lines.append(f"| {name} | {row['p50_ms']:.0f} | {row['vs_none']:.2f} |")
    r = f["reorder_cpu"]
    lines += [
        "",
        f"reorder, proxy CPU per request: cold {r['cold']['cpu_ms']:.0f} ms, warm {r['warm']['cpu_ms']:.1f} ms, none "
        f"{r['none']['cpu_ms']:.1f} ms (wall cold {r['cold']['wall_ms']:.0f} ms)",
        "",
        *ranker_lines(r, None),
    ]
    st = f["startup_s"]
    lines.append(
        f"start-up: /healthz {st['healthz']:.1f} s, /startupz {st['startupz']:.1f} s; RSS idle "
        f"{f['rss_mib_idle']:.0f} MiB, after the run {f['rss_mib_after']:.0f} MiB"
    )
    for name, v in f.get("variant_startup", {}).items():
        lines.append(
            f"start-up, {name}: spawn to /startupz {v['since_spawn']:.1f} s (contextlift: "
            f"{st['since_spawn']:.1f} s); RSS idle {v['rss_mib_idle']:.0f} MiB"
        )
    return "\n".join(lines)


INSTALLS = {"core": "", "embeddings": "embeddings"}
"""`pip install .` alone and with each extra that changes what serving needs."""


def install_sizes() -> list[str]:
    """Each install into a fresh venv of its own (pip's cache as it is): its size on disk and its time."""
    import tempfile

    lines = ["| install | size on disk, MiB | install time, s |", "|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        for name, extras in INSTALLS.items():
            venv = Path(folder) / name
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            started = time.perf_counter()
            if extras:  # torch's CPU build first, as scripts/install takes it
                subprocess.run([*pip, "--no-index", "--no-deps", "torch==2.13.0"], check=False)
            subprocess.run([*pip, f"{ROOT}[{extras}]" if extras else str(ROOT)], check=True)
            seconds = time.perf_counter() - started
            size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
            lines.append(f"| `pip install .{f'[{extras}]' if extras else ''}` | {size / 2**20:,.0f} | {seconds:.0f} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
