"""Bodies (issue 12 items 4 and 6, issue 20 items 6, 7 and 8): what a strict JSON parser refuses is refused,
and heavy or pathological bodies are answered (or refused) quickly, while `/healthz` stays responsive."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from hostile_replay.case import Case
from hostile_replay.context import Ctx, Verdict
from hostile_replay.payloads import DOCS_PROMPT

SURROGATE_DOCS = json.dumps(DOCS_PROMPT).replace("Place 4 is", "Place 4 \\ud800 is")
ANSWERED = "answered, not 5xx (200, 400 or 413 envelope)"
BOUNDED = "413/400 envelope or 200"


def _raw_chat(ctx: Ctx, content_json: str, extra: str = "", model_json: str | None = None) -> bytes:
    """A chat body written by hand, so that it can hold what json.dumps never writes (`\\ud800`, NaN)."""
    model = model_json or json.dumps(ctx.model)
    return (f'{{"model": {model}, "max_tokens": 8, "messages": [{{"role": "user", "content": {content_json}}}]'
            f"{extra}}}").encode()  # fmt: skip


async def _refused(content_json: str, extra: str, strategy: str | None, ctx: Ctx) -> Verdict:
    headers = {"X-Context-Strategy": strategy} if strategy else None
    reply = await ctx.chat(_raw_chat(ctx, content_json, extra), headers)
    return reply.envelope(400), reply.describe()


async def _surrogate_model_then_metrics(ctx: Ctx) -> Verdict:
    reply = await ctx.chat(_raw_chat(ctx, '"hi"', model_json='"model-\\ud800"'))
    metrics = await ctx.send("GET", "/metrics")
    return reply.envelope(400) and metrics.status == 200, f"{reply.describe()}; /metrics {metrics.status}"


async def _heavy_body(build: Callable[[Ctx], bytes], strategy: str | None, ctx: Ctx) -> Verdict:
    headers = {"X-Context-Strategy": strategy} if strategy else {}
    reply = await ctx.chat(build(ctx), headers, within=40)
    ok = reply.cut is None and (reply.status == 200 or reply.envelope(400, 413))
    return ok, f"{reply.describe()} in {reply.seconds:.1f} s"


def _prompt(text: str) -> Callable[[Ctx], bytes]:
    return lambda ctx: ctx.chat_body(text)


def _nested_json(ctx: Ctx) -> bytes:
    nested = '{"a": ' * 2000 + "1" + "}" * 2000
    return ctx.chat_body(f"Find the value.\n{nested}\nQuestion: what is a?")


def _documents_field(ctx: Ctx) -> bytes:
    documents = ",".join(['"d"'] * 1_000_000)
    return _raw_chat(ctx, '"Question: which document?"', f', "documents": [{documents}]')


def _identical_parts(ctx: Ctx) -> bytes:
    parts = [{"type": "text", "text": "the same passage"}] * 40_000 + [{"type": "text", "text": "Question: which?"}]
    return ctx.chat_body(parts)


HEAVY = (  # name, body, strategy, expected
    ("JSON nested 2,000 deep in content, reorder", _nested_json, "reorder", ANSWERED),
    ('"<doc>" x 16,000, no strategy', _prompt("<doc>" * 16_000), None, ANSWERED),
    ('"<doc>" x 16,000, reorder', _prompt("<doc>" * 16_000), "reorder", ANSWERED),
    ('"<doc " x 16,000, reorder', _prompt("<doc " * 16_000), "reorder", ANSWERED),
    ('"<document>" x 12,000, reorder', _prompt("<document>" * 12_000), "reorder", ANSWERED),
    ("documents field of 10^6 short strings", _documents_field, None, BOUNDED),
    # Issue 50, item 1: one search over a 5 MB context held the interpreter's lock 2.0-2.6 s; past max_scanned_chars
    # a text is not scanned, and one just under it is scanned in searches short enough for /healthz.
    (
        "a 5 MB context of blank-line runs, reorder",
        _prompt("Context:\n" + "a\n\n\n" * 1_250_000 + "Question: q?"),
        "reorder",
        ANSWERED,
    ),
    (
        "a 2 MB context of blank-line runs, reorder",
        _prompt("Context:\n" + "a\n\n\n" * 500_000 + "Question: q?"),
        "reorder",
        ANSWERED,
    ),
    ("40,000 identical text parts, reorder; budget=1", _identical_parts, "reorder; budget=1", BOUNDED),
)


def body_cases() -> list[Case]:
    case = functools.partial(Case, "bodies", probe=True)
    p = functools.partial
    return [
        case("lone surrogate \\ud800 in content", "400 envelope", p(_refused, '"hi \\ud800 there"', "", None)),
        case("lone surrogate in content, streamed medoid", "400 envelope",
             p(_refused, SURROGATE_DOCS, ', "stream": true', "medoid")),
        case("lone surrogate in the model name, then /metrics", "400 envelope; /metrics 200",
             _surrogate_model_then_metrics),
        case("NaN in the body", "400 envelope", p(_refused, '"hi"', ', "temperature": NaN', None)),
        case("Infinity in the body", "400 envelope", p(_refused, '"hi"', ', "temperature": Infinity', None)),
        *(case(name, f"{expected}; /healthz < 1 s", p(_heavy_body, build, strategy), timeout=45)
          for name, build, strategy, expected in HEAVY),
    ]  # fmt: skip
