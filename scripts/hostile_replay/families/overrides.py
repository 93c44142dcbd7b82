"""Overrides (issue 12 item 3, issue 20 item 3): a client cannot point the proxy at another upstream, by
header or body field, and the forwarding headers of a front never reach the upstream."""

from __future__ import annotations

import functools

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict

OVERRIDE_HEADERS = ("X-Upstream-Url", "X-Base-Url", "X-Api-Base", "X-Context-Upstream", "X-Context-Upstream-Url")
OVERRIDE_FIELDS = ("api_base", "base_url")
ELSEWHERE = "http://127.0.0.1:9/v1"
"""The discard port: were the override obeyed, the request would go nowhere useful."""
UNFORWARDED_HEADERS = {"X-Forwarded-Host": "evil.example", "Forwarded": "host=evil.example;proto=https",
                       "X-Original-URL": "/admin", "X-Forwarded-Prefix": "/admin"}  # fmt: skip
ROUTES = ("models", "chat")


async def _override(route: str, headers: dict[str, str], fields: dict[str, str], ctx: Ctx) -> Verdict:
    return await ctx.refused(ctx.call(route, headers=headers, **fields))


async def _not_forwarded(route: str, name: str, ctx: Ctx) -> Verdict:
    mark = ctx.mark()
    reply = await ctx.call(route, headers={name: UNFORWARDED_HEADERS[name]})
    seen = ctx.seen(mark)
    leaked = sum(name.lower() in s.headers for s in seen)
    ok = not leaked and reply.status is not None and reply.status < 500
    return ok, f"{reply.describe()}, upstream got the header in {leaked} of {len(seen)} requests"


def override_cases() -> list[Case]:
    refused = "400 envelope, nothing upstream"
    cases = [
        Case("overrides", f"{name} on {route}", refused, functools.partial(_override, route, {name: ELSEWHERE}, {}))
        for route in ROUTES
        for name in OVERRIDE_HEADERS
    ]
    cases += [
        Case("overrides", f"body field {name} on embeddings", refused,
             functools.partial(_override, "embeddings", {}, {name: ELSEWHERE}))
        for name in OVERRIDE_FIELDS
    ]  # fmt: skip
    expected = "not forwarded upstream (answer 200, or 400 envelope)"
    cases += [
        Case("overrides", f"{name} on {route}", expected, functools.partial(_not_forwarded, route, name),
             local_only=True)
        for route in ROUTES
        for name in UNFORWARDED_HEADERS
    ]  # fmt: skip
    return cases
