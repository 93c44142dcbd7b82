"""Policy file and shadow evaluation (hardening part three, items 1-8): what an operator's file system and a
client's text can do to the policy watcher, the shadow sink and the tools that read it.

These cases need a proxy with a watched policy file and shadow evaluation on, which the shared local proxy has
not (shadow calls would change what the other families count): the first of them starts a second proxy, on its
own fake upstream and in a folder of its own, and the last one stops it with SIGTERM.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.fake_upstream import FakeUpstream, Seen, Send, answer_normally, by_stream, hang, reply_json
from hostile_replay.knobs import HEALTHZ_LIMIT, MiB, local_env
from hostile_replay.local_proxy import ROOT, STARTUP_LIMIT, free_port
from hostile_replay.payloads import completion_json

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is about topic {i}" for i in range(1, 6))
PROMPT = f"{DOCS}\n\nQuestion: which fact comes first?\nAnswer:"
DEEP = "x = " + "[" * 3000 + "]" * 3000 + "\n"
CREDENTIALS = {
    "Ocp-Apim-Subscription-Key": "apim-hostile-3c9d0e1f2a3b",
    "x-goog-api-key": "AIzaSy-hostile-77aa11bb",
    "x-portkey-api-key": "portkey-hostile-5e6f7a8b9c",
    "X-Gateway-Token": "gateway-hostile-0d1e2f3a",
}
QUEUED = 34
"""Issue item 6: 34 queued bodies of 1 MB grew the proxy by 841 MiB."""


def policy(rule_id: str, evidence_id: str | None = None) -> str:
    text = f'version = 1\n[[rule]]\nid = "{rule_id}"\nstrategy = "{"reorder" if evidence_id else "none"}"\n'
    if evidence_id is not None:
        fields = f'id = "{evidence_id}", lift = 0.1, ci95 = [0.0, 0.2], n = 9, report = "r", date = "d"'
        text += f"evidence = {{ {fields} }}\n"
    return text


@dataclass
class Second:
    """A proxy process of this family's own, its fake upstream and its folder (policy file, sink, log)."""

    url: str
    proxy: subprocess.Popen[bytes]
    upstream: FakeUpstream
    folder: Path
    server: uvicorn.Server

    @property
    def policy(self) -> Path:
        return self.folder / "policy.toml"

    @property
    def sink(self) -> Path:
        return self.folder / "shadow.jsonl"

    @property
    def log(self) -> Path:
        return self.folder / "proxy.log"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proxy.poll() is None:
            self.proxy.kill()
            self.proxy.wait(timeout=10)
        self.server.should_exit = True
        shutil.rmtree(self.folder, ignore_errors=True)


SECOND_ENV = {
    "CONTEXTLIFT_POLICY_POLL_SECONDS": "0.2",
    "CONTEXTLIFT_SHADOW_RATE": "1",
    "CONTEXTLIFT_SHADOW_CAPTURE": "true",
    "CONTEXTLIFT_SHADOW_USE_CLIENT_KEY": "true",
    "CONTEXTLIFT_SHADOW_QUEUE": "64",
    "CONTEXTLIFT_SHADOW_MAX_IN_FLIGHT": "1",
    "CONTEXTLIFT_SHADOW_CALLS_PER_MINUTE": "100000",
    "CONTEXTLIFT_SHADOW_TOKENS_PER_MINUTE": "100000000",
    "CONTEXTLIFT_UPSTREAM_TIMEOUT": "120",
    "CONTEXTLIFT_UPSTREAM_DEADLINE": "120",
    "CONTEXTLIFT_MAX_IN_FLIGHT": "64",
    "CONTEXTLIFT_LOG_LEVEL": "info",
}
"""The second proxy: a watched policy file, shadow on every request with capture, no operator key (the client's
credentials are what an upstream could echo into the sink), a queue and budget the memory case cannot fill."""


def _start(ctx: Ctx, extra: dict[str, str], ready: str = "/startupz") -> Second:
    """A proxy process with the local environment and `extra`, without the operator's key, on a fake upstream
    of its own; returned once `ready` answers 200."""
    folder = Path(tempfile.mkdtemp(prefix="hostile-shadow-"))
    (folder / "policy.toml").write_text(policy("first"))
    upstream = FakeUpstream()
    upstream_port, proxy_port = free_port(), free_port()
    config = uvicorn.Config(upstream, host="127.0.0.1", port=upstream_port, log_level="critical", lifespan="off",
                            http="h11", h11_max_incomplete_event_size=MiB)  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, name="fake-upstream-2", daemon=True).start()
    env = {k: v for k, v in local_env(ctx.knobs, "").items() if k != "CONTEXTLIFT_UPSTREAM_API_KEY"}
    env.update({"CONTEXTLIFT_POLICY_FILE": str(folder / "policy.toml"),
                "CONTEXTLIFT_SHADOW_SINK": str(folder / "shadow.jsonl"), **extra})  # fmt: skip
    command = [sys.executable, "-m", "contextlift.proxy.cli", "serve", "--host", "127.0.0.1", "--port", str(proxy_port),
               "--upstream", f"http://127.0.0.1:{upstream_port}/v1"]  # fmt: skip
    with (folder / "proxy.log").open("wb") as log:
        proxy = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    second = Second(f"http://127.0.0.1:{proxy_port}", proxy, upstream, folder, server)
    atexit.register(second.stop)
    deadline = time.monotonic() + STARTUP_LIMIT
    while time.monotonic() < deadline and proxy.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{second.url}{ready}", timeout=2).status_code == 200:
                return second
        time.sleep(0.2)
    second.stop()
    raise RuntimeError(f"the proxy did not start (exit {proxy.poll()}): {second.log_text()[-500:]}")


async def _second(ctx: Ctx) -> Second:
    if "second" not in ctx.memo:
        ctx.memo["second"] = asyncio.ensure_future(asyncio.to_thread(_start, ctx, SECOND_ENV))
    second: Second = await asyncio.shield(ctx.memo["second"])
    return second


async def _until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _auto(second: Second) -> httpx.Response:
    body = {"model": "hostile-model", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8}
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(f"{second.url}/v1/chat/completions", json=body,
                                 headers={"X-Context-Strategy": "auto"})  # fmt: skip


async def _worst_healthz(second: Second, seconds: float) -> float:
    """The worst `/healthz` latency over `seconds`, polled on one connection."""
    worst = 0.0
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=30) as client:
        while time.monotonic() < end:
            started = time.monotonic()
            try:
                await client.get(f"{second.url}/healthz")
                worst = max(worst, time.monotonic() - started)
            except httpx.HTTPError:
                return float("inf")  # no answer at all (the process is gone) is the worst
            await asyncio.sleep(0.05)
    return worst


def _refusals(second: Second, fragment: str) -> int:
    return sum(1 for line in second.log_text().splitlines() if "policy refused" in line and fragment in line)


async def _refused_then(second: Second, text: str | bytes | None, fragment: str) -> tuple[bool, str]:
    """Put `text` at the policy path (None: a FIFO), wait for the watcher's refusal naming `fragment`."""
    before = _refusals(second, fragment)
    path = second.policy
    path.unlink(missing_ok=True)
    if text is None:
        os.mkfifo(path)
    elif isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    refused = await _until(lambda: _refusals(second, fragment) > before, 15)
    return refused, "refused with a log line" if refused else f"no log line naming {fragment!r}"


async def _restore(second: Second, rule_id: str) -> bool:
    second.policy.unlink(missing_ok=True)
    second.policy.write_text(policy(rule_id))
    second.proxy.send_signal(signal.SIGHUP)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if (await _auto(second)).headers.get("x-context-policy") == f"rule={rule_id}":
            return True
        await asyncio.sleep(0.2)
    return False


async def _deep_policy(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    refused, observed = await _refused_then(second, DEEP, "nested too deep")
    second.proxy.send_signal(signal.SIGHUP)
    await asyncio.sleep(1.0)
    if second.proxy.poll() is not None:
        return False, f"{observed}; SIGHUP ended the process (exit {second.proxy.poll()})"
    reloaded = await _restore(second, "after-deep")
    return (
        refused and reloaded,
        f"{observed}; alive after SIGHUP; a good file then {'loaded' if reloaded else 'NOT loaded'}",
    )


async def _em_dash(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    refused, observed = await _refused_then(second, policy("dash", "litm \u2014 reorder"), "evidence.id")
    response = await _auto(second)
    ok = refused and response.status_code == 200 and response.headers.get("x-context-policy") == "rule=after-deep"
    return ok, f"{observed}; auto answered {response.status_code} under {response.headers.get('x-context-policy')}"


async def _large(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    big = policy("big") + ("# " + "x" * 98 + "\n") * (12 * MiB // 100)
    watching = asyncio.create_task(_worst_healthz(second, 3.0))
    refused, observed = await _refused_then(second, big, "policy_max_bytes")
    worst = await watching
    return refused and worst < HEALTHZ_LIMIT, f"{observed}; worst /healthz {worst:.2f} s"


async def _fifo(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    watching = asyncio.create_task(_worst_healthz(second, 2.0))
    refused, observed = await _refused_then(second, None, "not a regular file")
    second.proxy.send_signal(signal.SIGHUP)
    worst = max(await watching, await _worst_healthz(second, 1.0))
    return refused and worst < HEALTHZ_LIMIT, f"{observed}; worst /healthz {worst:.2f} s (the FIFO stays)"


async def _shadowed(second: Second, bodies: list[dict[str, object]], headers: dict[str, str] | None = None) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        for body in bodies:
            await client.post(f"{second.url}/v1/chat/completions", json=body, headers=headers or {})


def _records_in_sink(second: Second) -> int:
    from contextlift.eval.sinks import read_sink

    return len(read_sink(second.sink).records) if second.sink.exists() else 0


async def _separators(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    before = _records_in_sink(second)
    models = ["m\u2028a", "m\u2029b", "m\x85c", "plain", "m\u2028\u2029\x85d"]
    content = PROMPT + " \u2028 \u2029 \x85"
    await _shadowed(second, [{"model": m, "messages": [{"role": "user", "content": content}], "max_tokens": 8}
                             for m in models])  # fmt: skip
    counted = await _until(lambda: _records_in_sink(second) - before >= len(models), 20)
    read = _records_in_sink(second) - before
    raw = second.sink.read_bytes() if second.sink.exists() else b""
    return counted and read == len(models) and raw.isascii(), f"{len(models)} sampled, {read} records read back, " + (
        "sink ASCII" if raw.isascii() else "sink not ASCII"
    )


def _echo(seen: Seen, send: Send) -> Awaitable[None]:
    """An upstream that repeats every credential header it received in its answer."""
    text = "T1 " + " ".join(seen.headers.get(name.lower(), "") for name in CREDENTIALS)
    return reply_json(send, 200, completion_json(text))


async def _credentials(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    second.upstream.handler = _echo
    try:
        before = _records_in_sink(second)
        await _shadowed(second, [{"model": "hostile-model", "messages": [{"role": "user", "content": PROMPT}]}],
                        headers=CREDENTIALS)  # fmt: skip
        await _until(lambda: _records_in_sink(second) > before, 20)
    finally:
        second.upstream.handler = answer_normally
    text = second.sink.read_text() if second.sink.exists() else ""
    leaked = [name for name, value in CREDENTIALS.items() if value in text]
    written = _records_in_sink(second) > before
    return written and not leaked, "record written, " + (
        f"in clear: {', '.join(leaked)}" if leaked else "none in clear"
    )


async def _offline_tools(ctx: Ctx) -> Verdict:
    """shadow-report and the replay's reader on a sink with one good record and the records the issue names."""
    folder = Path(tempfile.mkdtemp(prefix="hostile-sink-"))
    try:
        good = {"time": "2026-11-25T00:00:00+00:00", "model": "m", "position_sensitive": False, "calls": 1,
                "tokens": 10, "seconds": 0.1, "candidates": [{"strategy": "reorder", "agrees": True, "exact": True,
                "error": None, "calls": 1, "tokens": 10, "seconds": 0.1}]}  # fmt: skip
        replayable = {**good, "captured": {"body": {"model": "m", "max_tokens": {"n": 1},
                      "messages": [{"role": "user", "content": PROMPT}]}, "served": "T1", "answers": []}}  # fmt: skip
        sink = folder / "shadow.jsonl"
        sink.write_bytes(b"\n".join([json.dumps(good).encode(), json.dumps(replayable).encode(),
                                     b'{"candidates":[1]}', json.dumps({"model": "no candidates"}).encode(),
                                     b'{"candidates":[],"model":"\xe2\x80"}']) + b"\n")  # fmt: skip
        report = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "contextlift.proxy.cli", "shadow-report", str(sink), "--out",
                             str(folder / "report")], cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        from contextlift.eval.tasks.replay import build

        def never_asked(*_: object) -> str:
            raise AssertionError("no record here gets as far as a generated question")

        try:
            _, notes = build(sink, never_asked)  # type: ignore[arg-type]
            replay = notes[0]
        except Exception as error:
            replay = f"replay raised {type(error).__name__}: {error}"
        ok = (report.returncode == 0 and "3 malformed lines skipped" in report.stdout
              and "Traceback" not in report.stderr and "4 malformed records skipped" in replay)  # fmt: skip
        said = report.stdout.strip().splitlines()[0] if report.stdout.strip() else report.stderr[-120:]
        replayed = replay.split("; ")[2] if replay.count("; ") >= 2 else replay[:120]
        return ok, f"shadow-report exit {report.returncode}: {said[-60:]}; replay: {replayed[:60]}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")) / 1024


async def _queue_memory(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    # The served requests stream; the shadow calls never do, and hang: the one worker holds the first sample
    # and the rest stay queued.
    second.upstream.handler = by_stream(answer_normally, hang(600))
    payload = "[" + ",".join(["[]"] * 330_000) + "]"
    body = {"model": "hostile-model", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8,
            "stream": True, "x_payload": None}  # fmt: skip
    content = json.dumps(body).replace("null", payload).encode()
    async with httpx.AsyncClient(timeout=60) as client:
        await client.post(f"{second.url}/v1/chat/completions", content=content,
                          headers={"content-type": "application/json"})  # the one the worker holds  # fmt: skip
        await asyncio.sleep(1.0)
        before = _rss_mib(second.proxy.pid)
        for _ in range(QUEUED):
            reply = await client.post(f"{second.url}/v1/chat/completions", content=content,
                                      headers={"content-type": "application/json"})  # fmt: skip
            if reply.status_code != 200:
                return False, f"a {len(content) / MiB:.2f} MB body answered {reply.status_code}"
    await asyncio.sleep(1.0)
    grown = _rss_mib(second.proxy.pid) - before
    each = grown / QUEUED
    return (
        each < 3.0,
        f"{QUEUED} queued bodies of {len(content) / MiB:.2f} MiB: RSS +{grown:.0f} MiB ({each:.1f} MiB each)",
    )


async def _sigterm_with_fifo(ctx: Ctx) -> Verdict:
    second = await _second(ctx)
    try:
        second.policy.unlink(missing_ok=True)
        os.mkfifo(second.policy)
        second.proxy.send_signal(signal.SIGHUP)
        await asyncio.sleep(0.5)
        second.proxy.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            await asyncio.to_thread(second.proxy.wait, ctx.knobs.shutdown_wait)
        except subprocess.TimeoutExpired:
            return False, f"still running {ctx.knobs.shutdown_wait:g} s after SIGTERM"
        seconds = time.monotonic() - sent
        return (
            seconds <= ctx.knobs.shutdown_grace + 1,
            f"exited {seconds:.1f} s after SIGTERM (exit {second.proxy.returncode})",
        )
    finally:
        second.stop()


async def _no_operator_key(ctx: Ctx) -> Verdict:
    """A proxy with shadow on, no operator key and shadow_use_client_key left off: the client's key pays for its
    own request only. Nothing here needs the embedder: it is not waited for."""
    third = await asyncio.to_thread(_start, ctx, {"CONTEXTLIFT_SHADOW_RATE": "1"}, "/healthz")
    try:
        mark = third.upstream.mark()
        body = {"model": "hostile-model", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8}
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(3):
                await client.post(f"{third.url}/v1/chat/completions", json=body,
                                  headers={"Authorization": "Bearer sk-client-hostile-0a1b2c3d"})  # fmt: skip
            await asyncio.sleep(1.0)
            metrics = (await client.get(f"{third.url}/metrics")).text
        calls = len(third.upstream.since(mark))
        counted = [line.rsplit(" ", 1)[1] for line in metrics.splitlines()
                   if line.startswith("contextlift_shadow_samples_total") and "skipped-no-key" in line]  # fmt: skip
        skipped = counted[0] if counted else "0"
        ok = calls == 3 and float(skipped) == 3
        return ok, f"3 sampled requests: {calls} upstream calls on the client's key, {float(skipped):g} counted skipped"
    finally:
        third.stop()


def shadow_policy_cases() -> list[Case]:
    """In the order they run: the second proxy starts with the first, and stops with the last."""
    cases = [
        ("policy", "policy nested 3,000 deep, then SIGHUP", "refused, logged; alive after SIGHUP; next file loads",
         _deep_policy, STARTUP_LIMIT + 30),
        ("policy", "evidence id with an em dash", "refused naming evidence.id; auto still 200", _em_dash, 20.0),
        ("policy", "12 MB policy file", "refused (policy_max_bytes); /healthz < 1 s meanwhile", _large, 30.0),
        ("policy", "FIFO at the policy path, then SIGHUP", "refused (not a regular file); /healthz < 1 s", _fifo, 30.0),
        ("shadow", "model and prompt with U+2028, U+2029, U+0085", "5 sampled, 5 records read back", _separators,
         40.0),
        ("shadow", "credential headers echoed by the upstream", "none in clear in the captured record",
         _credentials, 40.0),
        ("shadow", "offline tools on malformed records", "skipped and counted, never a traceback", _offline_tools,
         60.0),
        ("shadow", "no operator key, shadow_use_client_key off", "3 upstream calls for 3 requests, 3 counted skipped",
         _no_operator_key, STARTUP_LIMIT),
        ("shadow", f"{QUEUED} queued 1 MB bodies of [[],[],...]", "RSS < 3 MiB a queued body", _queue_memory, 120.0),
        ("policy", "SIGTERM with a FIFO at the policy path", "exits within the grace", _sigterm_with_fifo, 30.0),
    ]  # fmt: skip
    return [Case(family, name, expected, run, local_only=True, timeout=timeout)
            for family, name, expected, run, timeout in cases]  # fmt: skip
