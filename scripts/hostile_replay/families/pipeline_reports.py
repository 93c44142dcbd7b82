"""What the response says of a pipeline (issue 50 items 3 to 6): the order headers are those of the body the
upstream received, a step that cannot run after another is refused rather than passed over, medoid asks again
without the `seed` an upstream refuses, and a failed request names only the steps that ran on it."""

from __future__ import annotations

import functools
import json
import re

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.fake_upstream import Seen, Send, answer, answer_normally, reply_json
from hostile_replay.payloads import DOCS_PROMPT, server_error

_PLACE = re.compile(r"Place (\d) is known")
_SEED_REFUSED = json.dumps(
    {"error": {"message": "Unrecognized request argument supplied: seed", "type": "invalid_request_error",
               "param": None, "code": None}}
).encode()  # fmt: skip
"""Azure OpenAI's answer (before API version 2023-12-01-preview) to a request naming `seed`."""


def _order_sent(seen: Seen) -> tuple[list[int], int]:
    """The documents' numbers in the body's first copy of the context, and how many copies it holds."""
    body = seen.json if isinstance(seen.json, dict) else {}
    text = "\n".join(str(m.get("content")) for m in body.get("messages", []) if isinstance(m, dict))
    found = [int(n) for n in _PLACE.findall(text)]
    order = list(dict.fromkeys(found))
    return order, len(found) // max(1, len(order))


async def _order_headers(selection: str, ctx: Ctx) -> Verdict:
    reply, calls = await ctx.chat_seen(ctx.chat_body(DOCS_PROMPT), {"X-Context-Strategy": selection})
    if reply.status != 200 or len(calls) != 1:
        return False, f"{reply.describe()}, {len(calls)} upstream calls"
    told, dropped = reply.headers.get("x-context-order", ""), reply.headers.get("x-context-dropped")
    order, copies = _order_sent(calls[0])
    said = list(range(1, 9)) if told == "kept" else [int(n) for n in told.split(",") if n.isdigit()]
    ok = said == order and dropped is None and copies == 2
    return ok, f"{reply.describe()}, X-Context-Order {told!r}, dropped {dropped!r}; sent {order} x{copies}"


async def _repeat_then_reorder(ctx: Ctx) -> Verdict:
    mark = ctx.mark()
    reply = await ctx.chat(ctx.chat_body(DOCS_PROMPT), {"X-Context-Strategy": "repeat, reorder"})
    return ctx.nothing_upstream(mark, reply.envelope(400) and reply.code == "invalid_strategy", reply.describe())


async def _medoid_seed_refused(ctx: Ctx) -> Verdict:
    async def refusing_seed(seen: Seen, send: Send) -> None:
        if isinstance(seen.json, dict) and "seed" in seen.json:
            await reply_json(send, 400, _SEED_REFUSED)
        else:
            await answer_normally(seen, send)

    ctx.script(refusing_seed)
    reply, calls = await ctx.chat_seen(ctx.chat_body(DOCS_PROMPT), {"X-Context-Strategy": "medoid; k=2"})
    seeded = ["seed" in c.json for c in calls if isinstance(c.json, dict)]
    strategy = reply.headers.get("x-context-strategy", "")
    ok = reply.status == 200 and "seed=refused" in strategy and seeded == [True, True, False, False]
    return ok, f"{reply.describe()}, X-Context-Strategy {strategy!r}, seeded calls {seeded}"


async def _failed_names_what_ran(ctx: Ctx) -> Verdict:
    ctx.script(answer(503, server_error("upstream down")))
    reply = await ctx.chat(ctx.chat_body("Say hi."), {"X-Context-Strategy": "reorder"})
    strategy = reply.headers.get("x-context-strategy")
    return reply.status >= 500 and strategy == "none", f"{reply.describe()}, X-Context-Strategy {strategy!r}"


def pipeline_report_cases() -> list[Case]:
    case = functools.partial(Case, "pipeline", local_only=True)
    return [
        case("repeat on 8 documents", "200, X-Context-Order kept, none dropped, the context twice",
             functools.partial(_order_headers, "repeat")),
        case("reorder, repeat on 8 documents", "200, X-Context-Order the body's order, none dropped, twice",
             functools.partial(_order_headers, "reorder; ranker=lexical; order=edges-last, repeat")),
        case("repeat, reorder", "400 invalid_strategy, nothing upstream", _repeat_then_reorder),
        case("medoid against an upstream refusing seed", "200, seed=refused, the calls again unseeded",
             _medoid_seed_refused),
        case("failed call, reorder without documents", "5xx naming X-Context-Strategy none", _failed_names_what_ran),
    ]  # fmt: skip
