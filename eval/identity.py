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

import httpx

from eval.report.literal import code_span
from eval.runner import bearer

_LISTED = ("id", "object", "owned_by", "root", "parent", "max_model_len")
"""The fields of a `/v1/models` entry that name what serves the model; others (vLLM's `created` and `permission`,
stamped per call, or whatever a gateway adds) would change the fingerprint from one run to the next."""
_LARGEST_ANSWER = 1 << 20
"""Bytes read of an upstream's description of itself: a model list or /props is a few kilobytes."""
_LONGEST_VALUE = 200
"""How much of each value is kept: its text ends up in every report, and an upstream may send anything."""


@dataclass(frozen=True, slots=True)
class UpstreamIdentity:
    model: str
    """The model name the eval sends."""
    details: dict[str, Any] = field(default_factory=dict)
    """Server, build, model file, its sha256 and settings for the embedded model; the `/v1/models` entry otherwise."""

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
) -> UpstreamIdentity:
    """The identity of the upstream behind the proxy at `base_url` (ending in `/v1`); `local`: the embedded model's
    own (`LocalModel.identity`). `upstream_url`, where the eval knows it: the upstream itself is asked what its
    server says of itself (llama.cpp's `/props`: model file and build; vLLM's `/version`). An upstream that lists
    nothing is known by the model name alone."""
    if local is not None:
        return UpstreamIdentity(model, dict(local))
    headers = bearer(api_key)
    listed = _json(f"{base_url}/models", headers).get("data")
    entry = (
        next((m for m in listed if isinstance(m, dict) and m.get("id") == model), {})
        if isinstance(listed, list)
        else {}
    )
    details: dict[str, Any] = {"listed": _kept({k: v for k, v in entry.items() if k in _LISTED})} if entry else {}
    if upstream_url:
        root = upstream_url.rstrip("/").removesuffix("/v1")
        props = _json(f"{root}/props", headers)
        settings = props.get("default_generation_settings")
        server = {
            **_kept({k: v for k, v in props.items() if k in ("model_path", "build_info", "total_slots")}),
            **_kept({k: v for k, v in settings.items() if k == "n_ctx"} if isinstance(settings, dict) else {}),
            **_kept({k: v for k, v in _json(f"{root}/version", headers).items() if k == "version"}),
        }
        if server:
            details["server"] = server
    return UpstreamIdentity(model, details)


def _json(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """The JSON object at `url`, or {} where there is none or it is longer than `_LARGEST_ANSWER`."""
    try:
        with httpx.stream("GET", url, headers=headers, timeout=10) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > _LARGEST_ANSWER:
                    return {}
        value = json.loads(body)
    except (httpx.HTTPError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _kept(fields: dict[str, Any]) -> dict[str, str]:
    """The scalar fields, each as text on one line, bounded (a number too: JSON allows one of any length)."""
    return {
        k: _printable(str(v))[:_LONGEST_VALUE] for k, v in fields.items() if isinstance(v, str | int | float | bool)
    }


def _printable(text: str) -> str:
    """`text` on one line, without the characters that would end a report's table cell or code span."""
    return "".join(c if c.isprintable() and c not in "`|" else " " for c in text)


def new_run_id() -> str:
    """Names one invocation of the eval: its start in UTC and a random suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") + "-" + secrets.token_hex(3)
