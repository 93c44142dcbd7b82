"""What the garbage collector costs the proxy at each concurrency: `contextlift serve` pinned to one core in front
of `scripts/bench.py`'s fake upstream, loaded by wrk at 16, 64 and 256 in flight (two rounds each, interleaved),
with every collection timed from `gc.callbacks` inside the proxy's process. Prints per concurrency: req/s, the
collections per generation, the milliseconds spent in them and their share of the round, the longest pause,
and the objects a young collection freed on average (the rest of what it walked survived: requests in flight).

    .venv/bin/python scripts/gc_profile.py               # about 1 minute; needs wrk
    .venv/bin/python scripts/gc_profile.py --young 50000  # another young-generation threshold

The proxy runs under this script (`--serve`), which installs the timer and writes the counts to a file on SIGUSR1.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import ROOT, _wait, settle, wrk_throughput

from contextlift.proxy.local_model import free_port

CONCURRENCY = (16, 64, 256)
ROUNDS = 2
SECONDS = 5.0


def _serve(stats_file: str, young: int | None, argv: list[str]) -> None:
    """Run `contextlift serve` in this process with each collection timed; SIGUSR1 writes the counts and resets."""
    counts: dict[int, list[float]] = {}
    started = [0.0]

    def timer(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        took = time.perf_counter() - started[0]
        entry = counts.setdefault(info["generation"], [0, 0.0, 0.0, 0])
        entry[0] += 1
        entry[1] += took
        entry[2] = max(entry[2], took)
        entry[3] += info["collected"]

    def write(*_: object) -> None:
        Path(stats_file).write_text(json.dumps(counts))
        counts.clear()

    gc.callbacks.append(timer)
    signal.signal(signal.SIGUSR1, write)
    if young:
        import contextlift.proxy.app

        contextlift.proxy.app.YOUNG_COLLECTION_EVERY = young
    sys.argv = ["contextlift", *argv]
    runpy.run_module("contextlift.proxy.cli", run_name="__main__")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--young", type=int, help="young-generation threshold (default: the proxy's own)")
    parser.add_argument("--serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        _serve(os.environ["GC_PROFILE_STATS"], args.young, args.serve)
        return 0
    wrk = shutil.which("wrk")
    if wrk is None:
        print("gc_profile: needs wrk on the PATH (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    cores = sorted(os.sched_getaffinity(0))
    proxy_core, rest = {cores[0]}, set(cores[1:]) or {cores[0]}
    fake_port, proxy_port = free_port(), free_port()
    stats_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"contextlift-gc-{os.getpid()}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CONTEXTLIFT_LOG_LEVEL": "warning",
           "CONTEXTLIFT_MAX_IN_FLIGHT": "512", "GC_PROFILE_STATS": str(stats_file)}  # fmt: skip
    bench = str(ROOT / "scripts" / "bench.py")
    fake = subprocess.Popen([sys.executable, bench, "--fake-upstream", str(fake_port), "0", "0.01"])
    os.sched_setaffinity(fake.pid, rest)
    young = ["--young", str(args.young)] if args.young else []
    serve = ["--serve", "serve", "--upstream", f"http://127.0.0.1:{fake_port}/v1", "--port", str(proxy_port)]
    proxy = subprocess.Popen([sys.executable, __file__, *young, *serve], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    os.sched_setaffinity(proxy.pid, proxy_core)
    os.sched_setaffinity(0, rest)
    url = f"http://127.0.0.1:{proxy_port}/v1"
    try:
        _wait(f"http://127.0.0.1:{fake_port}/v1/models")
        _wait(f"http://127.0.0.1:{proxy_port}/startupz")
        wrk_throughput(url, 64, 3, wrk)  # warm-up
        rows: dict[int, list[dict[str, Any]]] = {c: [] for c in CONCURRENCY}
        for _ in range(ROUNDS):
            for concurrency in CONCURRENCY:
                settle(proxy_core)
                proxy.send_signal(signal.SIGUSR1)  # reset the counts
                time.sleep(0.3)
                load = wrk_throughput(url, concurrency, SECONDS, wrk)
                proxy.send_signal(signal.SIGUSR1)
                time.sleep(0.3)
                rows[concurrency].append({"load": load, "gc": json.loads(stats_file.read_text())})
    finally:
        for process in (proxy, fake):
            process.terminate()
            process.wait(timeout=10)
        stats_file.unlink(missing_ok=True)
    print(f"young threshold: {args.young or 'the proxy default'}; {ROUNDS} rounds of {SECONDS:.0f} s per row")
    print("| in flight | req/s | young / older collections | ms collecting | share | longest ms | freed per young |")
    print("|---|---|---|---|---|---|---|")
    for concurrency, measured in rows.items():
        for row in measured:
            counts = {int(g): v for g, v in row["gc"].items()}
            young_n, young_s, young_max, young_freed = counts.get(0, [0, 0.0, 0.0, 0])
            older = [counts.get(g, [0, 0.0, 0.0, 0]) for g in (1, 2)]
            total = young_s + sum(o[1] for o in older)
            longest = max([young_max, *(o[2] for o in older)])
            print(f"| {concurrency} | {row['load']['rps']:.0f} | {young_n:.0f} / {sum(o[0] for o in older):.0f} | "
                  f"{total * 1000:.0f} | {total / SECONDS:.1%} | {longest * 1000:.0f} | "
                  f"{young_freed / max(1, young_n):,.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
