"""Which upstream answered: what an answer depends on besides the request, so that an answer is reused and a lift is
computed only among answers from the same upstream.

For the embedded model (started by the eval) that is its server's version and build, the model file's hash and its
generation settings (`proxy.local_model_server` writes them). For any other upstream it is what the proxy lists for
the model at `/v1/models` (vLLM names its weights there, `root`; OpenAI only the name): the most an OpenAI-compatible
API lets a client read.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx

from contextlift.eval.report.literal import LONGEST, code_span, one_line
from contextlift.eval.runner import bearer
from contextlift.eval.upstream_answers import UnreadAnswer, read_json_object

_LISTED = ("id", "object", "owned_by", "root", "parent", "max_model_len")
"""The fields of a `/v1/models` entry that name what serves the model; others (vLLM's `created` and `permission`,
stamped per call, or whatever a gateway adds) would change the fingerprint from one run to the next."""
DEADLINE = 10.0
"""Seconds the eval gives an upstream to describe itself, every answer together: a model list and /props come in
milliseconds; past it the run goes on knowing the upstream by what it read, and says what it did not."""
_READ_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class UpstreamIdentity:
    model: str
    """The model name the eval sends."""
    details: dict[str, Any] = field(default_factory=dict)
    """Server, build, model file, its sha256 and settings for the embedded model; the `/v1/models` entry otherwise."""
    unread: tuple[str, ...] = ()
    """What the upstream answered that was not read, and why (`identify`): said by the run, kept out of the
    fingerprint and the report."""

    @property
    def fingerprint(self) -> str:
        """16 hex digits naming the identity: the same upstream, built and set up alike, gives the same ones."""
        payload = json.dumps({"model": self.model, **self.details}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "model": self.model, **self.details}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> UpstreamIdentity:
        """The identity `to_json` wrote (run.json's `upstreams`)."""
        return cls(str(record.get("model", "")), {k: v for k, v in record.items() if k not in ("fingerprint", "model")})

    def describe(self) -> str:
        """One line for a report's head. The embedded model's details are its own server's (`LocalModel.identity`);
        any other upstream's are what it says, each in a code span."""
        details = self.details
        if "model_sha256" in details:
            settings = ", ".join(f"{k} {v}" for k, v in sorted((details.get("settings") or {}).items()))
            return (
                f"`{self.model}`: {details.get('model_file')} (sha256 {str(details.get('model_sha256'))[:12]}), "
                f"{details.get('server')}, {settings}; build `{details.get('build')}`"
            )
        # What an upstream says of itself, each value a code span: nothing in it reads as a report's structure.
        listed = {**(details.get("listed") or {}), **(details.get("server") or {})}
        extra = ", ".join(f"{k} {code_span(v)}" for k, v in sorted(listed.items()) if k not in ("id", "object"))
        return (
            code_span(self.model)
            + (f" ({extra})" if extra else "")
            + " as the upstream describes itself (no model file hash)"
        )


def identify(
    base_url: str,
    model: str,
    api_key: str | None = None,
    local: dict[str, Any] | None = None,
    upstream_url: str | None = None,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> UpstreamIdentity:
    """The identity of the upstream behind the proxy at `base_url` (ending in `/v1`); `local`: the embedded model's
    own (`LocalModel.identity`). `upstream_url`, where the eval knows it: the upstream itself is asked what its
    server says of itself (llama.cpp's `/props`: model file and build; vLLM's `/version`). An upstream that lists
    nothing is known by the model name alone; what it answered but could not be read (`eval.upstream_answers`),
    within DEADLINE in all, is said in `unread`."""
    if local is not None:
        return UpstreamIdentity(model, dict(local))
    return anyio.run(_identify, base_url, model, bearer(api_key), upstream_url, transport)


async def _identify(
    base_url: str,
    model: str,
    headers: dict[str, str],
    upstream_url: str | None,
    transport: httpx.AsyncBaseTransport | None,
) -> UpstreamIdentity:
    unread: list[str] = []
    deadline = anyio.current_time() + DEADLINE

    async def answer(url: str) -> dict[str, Any]:
        try:
            return await read_json_object(client, url, headers, deadline)
        except UnreadAnswer as why:
            if why.answered:
                unread.append(f"{url}: {_when_late(str(why))}")
            return {}

    async with httpx.AsyncClient(transport=transport, timeout=_READ_TIMEOUT) as client:
        listed = (await answer(f"{base_url}/models")).get("data")
        entry = (
            next((m for m in listed if isinstance(m, dict) and m.get("id") == model), {})
            if isinstance(listed, list)
            else {}
        )
        details: dict[str, Any] = {"listed": _kept({k: v for k, v in entry.items() if k in _LISTED})} if entry else {}
        if upstream_url:
            root = upstream_url.rstrip("/").removesuffix("/v1")
            props = await answer(f"{root}/props")
            settings = props.get("default_generation_settings")
            server = {
                **_kept({k: v for k, v in props.items() if k in ("model_path", "build_info", "total_slots")}),
                **_kept({k: v for k, v in settings.items() if k == "n_ctx"} if isinstance(settings, dict) else {}),
                **_kept({k: v for k, v in (await answer(f"{root}/version")).items() if k == "version"}),
            }
            if server:
                details["server"] = server
    return UpstreamIdentity(model, details, tuple(unread))


def first_listed_model(
    base_url: str, api_key: str | None = None, *, transport: httpx.AsyncBaseTransport | None = None
) -> str:
    """The id of the first model the proxy at `base_url` lists, read as `identify` reads the list.

    Raises:
        ValueError: the list could not be read, or its first entry has no id of at most 256 printable characters.
    """
    return anyio.run(_first_listed_model, base_url, bearer(api_key), transport)


async def _first_listed_model(
    base_url: str, headers: dict[str, str], transport: httpx.AsyncBaseTransport | None
) -> str:
    async with httpx.AsyncClient(transport=transport, timeout=_READ_TIMEOUT) as client:
        try:
            listing = await read_json_object(client, f"{base_url}/models", headers, anyio.current_time() + DEADLINE)
        except UnreadAnswer as why:
            raise ValueError(_when_late(str(why))) from None
    listed = listing.get("data")
    first = listed[0] if isinstance(listed, list) and listed and isinstance(listed[0], dict) else {}
    model = first.get("id")
    if not isinstance(model, str) or not model or len(model) > 256 or not model.isprintable():
        raise ValueError("its first entry has no id of at most 256 printable characters")
    return model


def _when_late(reason: str) -> str:
    return reason.replace("within the deadline", f"within {DEADLINE:g} s")


def _kept(fields: dict[str, Any]) -> dict[str, str]:
    """The scalar fields, each as text on one line, bounded (a number too: JSON allows one of any length)."""
    return {k: one_line(str(v))[:LONGEST] for k, v in fields.items() if isinstance(v, str | int | float | bool)}


def new_run_id() -> str:
    """Names one invocation of the eval: its start in UTC and a random suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") + "-" + secrets.token_hex(3)
