"""Running the cases: each within its own time limit and the run's budget, against a local proxy started
here or a deployment given by URL."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from hostile_replay.case import Case
from hostile_replay.context import Ctx
from hostile_replay.fake_upstream import answer_normally
from hostile_replay.families import all_cases
from hostile_replay.knobs import HEALTHZ_LIMIT, LOCAL_KNOBS, Knobs
from hostile_replay.local_proxy import local_proxy
from hostile_replay.payloads import gzip_bomb
from hostile_replay.probes import healthz_probe
from hostile_replay.report import Report, expected_text

RUN_BUDGET = 420.0
"""Seconds after which the remaining cases are reported as not run rather than run."""


async def run_case(ctx: Ctx, case: Case) -> tuple[bool, str, float | None]:
    """The case's verdict, bounded by its timeout; and the worst /healthz latency if it was probed."""
    probe = healthz_probe(ctx.url) if case.probe else contextlib.nullcontext([0.0])
    try:
        async with probe as worst:
            async with asyncio.timeout(case.timeout):
                ok, observed = await case.run(ctx)
    except TimeoutError:
        ok, observed = False, f"no verdict within {case.timeout:g} s"
    except Exception as error:
        ok, observed = False, f"the case broke: {type(error).__name__}: {error}"
    finally:
        if ctx.upstream is not None:
            ctx.upstream.handler = answer_normally
    if not case.probe:
        return ok, observed, None
    healthz = worst[0]
    if healthz >= HEALTHZ_LIMIT:
        ok, observed = False, f"{observed}; /healthz took {healthz:.1f} s"
    return ok, observed, healthz


async def run_all(ctx: Ctx, cases: Sequence[Case]) -> int:
    report = Report()
    for case in cases:
        if case.local_only and ctx.upstream is None:
            report.skip(case)
            continue
        expected = expected_text(case, ctx.knobs)
        if time.monotonic() - report.started > RUN_BUDGET:
            ok, observed, healthz = False, f"not run: past the run's budget of {RUN_BUDGET:g} s", None
        else:
            ok, observed, healthz = await run_case(ctx, case)
        report.record(case, expected, ok, observed, healthz)
    return report.finish()


async def run_against(url: str, knobs: Knobs, *, model: str, auth: dict[str, str], **local: Any) -> int:
    limits = httpx.Limits(max_keepalive_connections=0)  # a fresh connection per request: no keep-alive races
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30), limits=limits) as client:
        ctx = Ctx(url=url.rstrip("/"), knobs=knobs, client=client, model=model, auth=auth, **local)
        return await run_all(ctx, all_cases())


def run_deployment(url: str, knobs: Knobs, *, model: str, auth: dict[str, str]) -> int:
    """The client-side families against a running proxy; the exit status."""
    return asyncio.run(run_against(url, knobs, model=model, auth=auth))


def run_local() -> int:
    """Every family against a proxy started here in front of the fake upstream; the exit status (2 if the
    proxy did not start)."""
    key = f"sk-hostile-{secrets.token_hex(16)}"
    gzip_bomb()  # built before the clock of any case starts
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        log_path = Path(folder) / "proxy.log"
        try:
            with local_proxy(LOCAL_KNOBS, key, log_path) as (url, upstream, proxy):
                return asyncio.run(run_against(url, LOCAL_KNOBS, model="hostile-model", auth={}, upstream=upstream,
                                               proxy=proxy, proxy_log=log_path, key=key))  # fmt: skip
        except RuntimeError as error:
            print(f"hostile: {error}", file=sys.stderr)
            return 2
