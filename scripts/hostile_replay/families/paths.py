"""Paths (issue 12 item 1, issue 20 item 1): traversal, encoded separators and injected query, fragment or
header bytes in the raw request target never reach the upstream."""

from __future__ import annotations

import functools

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict

REFUSED_PATHS = (
    "/v1/../admin", "/v1/%2e%2e/admin", "/v1/..%2fadmin", "/v1/models/../../admin", "/v1/models%3Fx=1",
    "/v1/chat/completions%3Fx=1", "/v1/models%23frag", "/v1/models%0d%0aX-Injected:%201", "/v1/models%00",
    "/v1/%252e%252e/admin", "/v1/..%252fadmin", "/v1/..\\admin", "/v1/..%5cadmin", "/v1/..;/admin",
)  # fmt: skip


async def _plain_path(ctx: Ctx) -> Verdict:
    mark = ctx.mark()
    reply = await ctx.exchange([ctx.raw_request("GET", "/v1/models")])
    targets = [s.target for s in ctx.seen(mark)]
    if ctx.upstream is None:
        return reply.status == 200, reply.describe()
    return reply.status == 200 and targets == ["GET /v1/models"], f"{reply.describe()}, upstream got {targets}"


async def _refused_path(method: str, path: str, ctx: Ctx) -> Verdict:
    body = ctx.chat_body() if method == "POST" else b""
    return await ctx.refused(ctx.exchange([ctx.raw_request(method, path, body=body)]))


def path_cases() -> list[Case]:
    cases = [Case("paths", "GET /v1/models (control)", "200, upstream got GET /v1/models", _plain_path)]
    for path in REFUSED_PATHS:
        method = "POST" if "chat" in path else "GET"
        run = functools.partial(_refused_path, method, path)
        cases.append(Case("paths", f"{method} {path}", "400 envelope, nothing upstream", run))
    return cases
