"""Soak: mixed traffic through a real proxy process against a loopback fake upstream that injects faults.

Streaming and not, with and without strategies; the fake upstream answers 503 now and then, sometimes
never answers, sometimes drops a stream mid-way. Prints requests, errors by kind, p50/p99 latency and the
proxy process's memory and open file descriptors at start and end, then one JSON line. Exits 1 if the proxy
answered 500 of its own, a request hung, or descriptors leaked.

    .venv/bin/python scripts/soak.py --seconds 60          # what CI runs
    .venv/bin/python scripts/soak.py --seconds 1800        # the 30-minute soak
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from contextlift.proxy.local_model import free_port

DOCS = "\n".join(f"Document [{i}](Title: Place {i}) Place {i} is known for export number {i}." for i in range(1, 9))
PROMPT = f"Answer from the documents.\n\n{DOCS}\n\nQuestion: what is place 4 known for?\nAnswer:"
SELECTIONS = [None, "reorder", "query-aware", "medoid; k=3", "recite", "fact; rounds=2", "reorder, medoid; k=2"]
HANG_SECONDS = 30
UPSTREAM_TIMEOUT = 1.0
CLIENT_TIMEOUT = 20.0
"""Longer than any legitimate path (retries and timeouts included): a request still open then has hung."""


def _completion(text: str) -> bytes:
    return json.dumps({
        "id": "soak", "object": "chat.completion", "created": 0, "model": "soak",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }).encode()  # fmt: skip


def _chunk(text: str) -> bytes:
    body = {"id": "soak", "object": "chat.completion.chunk", "created": 0, "model": "soak",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}  # fmt: skip
    return f"data: {json.dumps(body)}\n\n".encode()


async def faulty_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """503 in 6% of calls, no answer in 2%, a stream dropped mid-way in 4%, else a quick answer."""
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"].endswith("/models"):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"object": "list", "data": []}'})
        return
    fault = random.random()
    if fault < 0.06:
        await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"error": {"message": "busy"}}'})
        return
    if fault < 0.08:
        await asyncio.sleep(HANG_SECONDS)
        return
    await asyncio.sleep(random.uniform(0.005, 0.03))
    stream = b'"stream":true' in raw
    if not stream:
        body = _completion("Place 4 is known for export number 4.")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for word in ["Place", " 4", " is", " known", " for", " export", " 4."]:
        await send({"type": "http.response.body", "body": _chunk(word), "more_body": True})
        if fault < 0.12:
            raise ConnectionResetError("dropped by the fake upstream")
        await asyncio.sleep(0.002)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def _process_figures(pid: int) -> tuple[int, int]:
    """Resident memory in KiB and open descriptors of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def _one(client: httpx.AsyncClient, rng: random.Random, outcomes: Counter[str], latencies: list[float]) -> None:
    selection = rng.choice(SELECTIONS)
    stream = rng.random() < 0.5
    body = {"model": "soak", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16, "stream": stream}
    headers = {"X-Context-Strategy": selection} if selection else {}
    started = time.perf_counter()
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT):
            if stream:
                async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
                    text = (await response.aread()).decode()
                kind = f"http_{response.status_code}"
                if response.status_code >= 400:
                    kind += f"_{json.loads(text)['error'].get('code')}"
                if response.status_code == 200:
                    errors = [json.loads(line[6:])["error"]["code"] for line in text.splitlines()
                              if line.startswith('data: {"error"')]  # fmt: skip
                    kind = f"stream_error_{errors[0]}" if errors else "ok"
                    if not text.rstrip().endswith("data: [DONE]"):
                        kind = "stream_unterminated"
            else:
                response = await client.post("/v1/chat/completions", json=body, headers=headers)
                kind = "ok" if response.status_code == 200 else f"http_{response.status_code}"
                if response.status_code >= 400:
                    kind += f"_{response.json()['error'].get('code')}"
    except TimeoutError:
        kind = "hung"
    except httpx.HTTPError as error:
        kind = f"client_{type(error).__name__}"
    latencies.append(time.perf_counter() - started)
    outcomes[kind] += 1


async def _load(url: str, seconds: float, concurrency: int, max_requests: int) -> tuple[Counter[str], list[float]]:
    outcomes: Counter[str] = Counter()
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT + 5, limits=limits) as client:

        async def worker(seed: int) -> None:
            rng = random.Random(seed)
            while time.monotonic() < deadline and sum(outcomes.values()) < max_requests:
                await _one(client, rng, outcomes, latencies)

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return outcomes, latencies


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--concurrency", type=int, default=12)
    parser.add_argument("--max-requests", type=int, default=1_000_000)
    args = parser.parse_args()

    upstream_port, proxy_port = free_port(), free_port()
    upstream = uvicorn.Server(
        uvicorn.Config(faulty_upstream, host="127.0.0.1", port=upstream_port, log_level="critical")
    )
    threading.Thread(target=upstream.run, daemon=True).start()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CONTEXTLIFT_UPSTREAM_TIMEOUT": str(UPSTREAM_TIMEOUT),
           "CONTEXTLIFT_RETRY_BACKOFF": "0.05", "CONTEXTLIFT_LOG_LEVEL": "warning"}  # fmt: skip
    proxy = subprocess.Popen(
        [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--port", str(proxy_port),
         "--upstream", f"http://127.0.0.1:{upstream_port}/v1"],
        env=env, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{proxy_port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            print("proxy did not become ready", file=sys.stderr)
            return 1
        asyncio.run(_load(url, 3, 2, 30))  # warm-up: first requests load lazy parts
        rss_start, fds_start = _process_figures(proxy.pid)
        started = time.monotonic()
        outcomes, latencies = asyncio.run(_load(url, args.seconds, args.concurrency, args.max_requests))
        elapsed = time.monotonic() - started
        time.sleep(UPSTREAM_TIMEOUT + 1)  # let calls cut off by the load's end finish closing
        rss_end, fds_end = _process_figures(proxy.pid)
    finally:
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(timeout=60)
        upstream.should_exit = True

    total = sum(outcomes.values())
    latencies.sort()
    p50 = statistics.median(latencies) if latencies else 0.0
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else 0.0
    print(f"{total} requests in {elapsed:.0f} s ({total / elapsed:.1f}/s), concurrency {args.concurrency}")
    for kind, count in outcomes.most_common():
        print(f"  {kind:<48} {count:>7}")
    print(f"latency p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    print(f"proxy RSS {rss_start / 1024:.1f} -> {rss_end / 1024:.1f} MiB, open fds {fds_start} -> {fds_end}")
    unexpected = {k: v for k, v in outcomes.items() if k == "hung" or "internal_error" in k or k.startswith(
        ("client_", "stream_unterminated", "http_500"))}  # fmt: skip
    leaked = fds_end - fds_start > 20
    summary = {
        "requests": total, "outcomes": dict(outcomes), "p50_ms": round(p50 * 1000, 1), "p99_ms": round(p99 * 1000, 1),
        "rss_kib": [rss_start, rss_end], "fds": [fds_start, fds_end], "unexpected": unexpected, "fd_leak": leaked,
    }  # fmt: skip
    print(json.dumps(summary))
    return 1 if unexpected or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
