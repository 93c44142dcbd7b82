"""contextlift inside LiteLLM: a guardrail (LiteLLM's pre-call hook) that applies the proxy's detection, strategies
and shadow sampling to the requests LiteLLM routes, in LiteLLM's own process, with no hop of its own. Named in
LiteLLM's config file as its docs show for any custom guardrail:

    guardrails:
      - guardrail_name: contextlift
        litellm_params:
          guardrail: contextlift.proxy.litellm_guardrail.ContextLift
          mode: pre_call
          default_on: true
          strategy: reorder          # optional: the pipeline for requests that name none (else auto, or none)

Settings come from the same `CONTEXTLIFT_*` variables as `contextlift serve` (docs/configuration.md). A client
selects a pipeline with `X-Context-Strategy` or the `context_strategy` field, as through the proxy. What was found
and what ran goes into the request's metadata (`metadata.contextlift`, which LiteLLM's logs and callbacks carry) and,
for a whole answer, into the response's `X-Context-*` headers.

Only the steps that rewrite a request run here (`contextlift.proxy.rewrite`): LiteLLM makes the one upstream call, so a
step that makes calls of its own declines (`medoid -> none: chat-only`). Shadow evaluation samples as the proxy does
(`CONTEXTLIFT_SHADOW_RATE`); its calls go to `CONTEXTLIFT_UPSTREAM_URL`, which must be the provider itself (or a
LiteLLM route without this guardrail), or each shadow call would be rewritten again.

This module imports LiteLLM: only LiteLLM loads it."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import structlog
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.guardrails import GuardrailEventHooks

from contextlift.proxy import json_text
from contextlift.proxy.app import create_app
from contextlift.proxy.edge.intake import check_chat_body
from contextlift.proxy.errors import InvalidStrategy
from contextlift.proxy.off_loop import off_loop
from contextlift.proxy.request_log import RequestRecord
from contextlift.proxy.rewrite import rewrite
from contextlift.proxy.settings import Settings
from contextlift.proxy.shadow.case import ShadowCase
from contextlift.proxy.state import STRATEGY_FIELD, ProxyState
from contextlift.strategies import Completion

log = structlog.get_logger("contextlift.litellm")

CHAT_CALLS = frozenset({"completion", "acompletion"})
"""LiteLLM's call types whose `messages` this reads; any other call goes as it came."""
METADATA_KEY = "contextlift"
PLACEHOLDER_UPSTREAM = "http://127.0.0.1:9/v1"
"""The proxy's settings need an upstream; without shadow evaluation nothing calls it."""
MAX_PENDING_CASES = 1024
"""Sampled requests waiting for their answer (bounded: a call LiteLLM never completes is forgotten oldest first)."""
_NOT_THE_CLIENTS = frozenset({STRATEGY_FIELD, "metadata", "proxy_server_request", "guardrails", "secret_fields"})
"""Fields of LiteLLM's record of the body that a shadow call must not send again."""
_HEADERS = ("x-context-strategy", "x-context-documents", "x-context-format", "x-context-order", "x-context-policy")


class ContextLift(CustomGuardrail):
    """The guardrail LiteLLM builds from its config file: `strategy` and LiteLLM's own guardrail parameters."""

    def __init__(self, *, strategy: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        overrides: dict[str, Any] = {"default_strategies": {"*": strategy}} if strategy else {}
        settings = Settings(**overrides)  # and every CONTEXTLIFT_* variable
        if not settings.upstream_url:
            settings = settings.model_copy(update={"upstream_url": PLACEHOLDER_UPSTREAM})
        self._state: ProxyState = create_app(settings).state["proxy"]
        self._pending: OrderedDict[str, tuple[ShadowCase, float]] = OrderedDict()
        self._pending_bytes = 0
        # As the proxy's shadow queue bounds what it holds: its length times the largest body kept.
        self._max_pending_bytes = settings.shadow_queue * settings.shadow_max_body_bytes
        self._started = False

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """`data` with its messages rewritten by the selected pipeline (or as it came), and what happened in its
        metadata. Never fails the call for a reason of its own: a request it cannot read goes as it came."""
        if call_type not in CHAT_CALLS or not self.should_run_guardrail(data, GuardrailEventHooks.pre_call):
            return data
        self._start()
        state = self._state
        headers = _client_headers(data)
        body = {"model": data.get("model"), "messages": data.get("messages")}
        field = data.pop(STRATEGY_FIELD, None)
        if field is not None:
            body[STRATEGY_FIELD] = field
        record = RequestRecord("", "POST", "/v1/chat/completions", model=_text(data.get("model")))
        try:
            selection = state.select_pipeline(headers, body)
        except InvalidStrategy as error:
            # What the proxy refuses with a 400 LiteLLM answers with the same status.
            from fastapi import HTTPException

            raise HTTPException(error.status, {"error": f"contextlift: {error.message}"}) from None
        try:
            check_chat_body(body)
            rendered = await rewrite(state, selection, body, record, headers)
        except Exception as error:  # messages this cannot read, past the document limits ...: sent as they came
            record.applied, record.order = None, None
            record.document_format = f"none: unread ({type(error).__name__})"
            rendered = None
        if rendered is not None:
            data["messages"] = rendered["messages"]
        said = {name: value for name, value in record.response_headers().items() if name in _HEADERS}
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            metadata = data["metadata"] = {}
        metadata[METADATA_KEY] = said
        await self._sample(data, body, record, headers)
        return data

    async def async_post_call_failure_hook(
        self,
        request_data: dict[Any, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        """A sampled call that failed has no answer to compare: its case is let go."""
        if self._take_pending(request_data) is not None:
            shadow = self._state.shadow
            if shadow is not None:
                shadow.not_kept()

    async def async_post_call_success_hook(self, data: dict[str, Any], user_api_key_dict: Any, response: Any) -> Any:
        """The `X-Context-*` headers on a whole answer, and a sampled request's answer handed to shadow evaluation."""
        metadata = data.get("metadata")
        said = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
        hidden = getattr(response, "_hidden_params", None)
        if isinstance(said, dict) and isinstance(hidden, dict):
            extra = hidden.get("additional_headers")
            hidden["additional_headers"] = {**(extra if isinstance(extra, dict) else {}), **said}
        pending = self._take_pending(data)
        shadow = self._state.shadow
        if pending is not None and shadow is not None:
            case, started = pending
            answer = response.model_dump() if hasattr(response, "model_dump") else None
            if isinstance(answer, dict):
                case.served_completion(Completion(answer))
                usage = answer.get("usage")
                tokens = int(usage.get("total_tokens") or 0) if isinstance(usage, dict) else 0
                shadow.submit(case, 200, 1, tokens, time.perf_counter() - started)
        return response

    async def _sample(self, data: dict[str, Any], body: dict[str, Any], record: RequestRecord, headers: Any) -> None:
        """Keep what shadow evaluation needs of a sampled request until its answer comes (written off the loop:
        in proportion to the request)."""
        shadow = self._state.shadow
        if shadow is None or not shadow.sampled():
            return
        if data.get("stream"):  # the answer is LiteLLM's to stream: this hook never reads it
            shadow.not_kept()
            return
        try:
            raw = await off_loop(lambda: json_text.dumps(_client_body(data, body), compact=True).encode())
        except (TypeError, ValueError):  # a number JSON cannot write back (1e999 read as infinity)
            raw = b""
        if not raw or len(raw) > self._state.settings.shadow_max_body_bytes:
            shadow.not_kept()
            return
        case = ShadowCase(raw, record.requested, dict(headers), "", record.model, record.requested.shape)
        self._take_pending(data)  # a call id seen twice keeps one case
        self._pending[str(data.get("litellm_call_id"))] = (case, time.perf_counter())
        self._pending_bytes += len(raw)
        while len(self._pending) > MAX_PENDING_CASES or self._pending_bytes > self._max_pending_bytes:
            _, (dropped, _) = self._pending.popitem(last=False)
            self._pending_bytes -= len(dropped.raw)
            shadow.not_kept()

    def _take_pending(self, data: Mapping[str, Any]) -> tuple[ShadowCase, float] | None:
        pending = self._pending.pop(str(data.get("litellm_call_id")), None)
        if pending is not None:
            self._pending_bytes -= len(pending[0].raw)
        return pending

    def _start(self) -> None:
        """Start what the proxy starts with its app (shadow workers), once, on LiteLLM's event loop."""
        if self._started:
            return
        self._started = True
        if self._state.shadow is not None:
            self._state.shadow.start()
        asyncio.get_running_loop().run_in_executor(None, self._state.tokenizer.count, "warm-up")


def _client_headers(data: Mapping[str, Any]) -> dict[str, str]:
    """The client's request headers, lower-cased, as LiteLLM recorded them."""
    request = data.get("proxy_server_request")
    headers = request.get("headers") if isinstance(request, Mapping) else None
    if not isinstance(headers, Mapping):
        metadata = data.get("metadata")
        headers = metadata.get("headers") if isinstance(metadata, Mapping) else None
    if not isinstance(headers, Mapping):
        return {}
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _client_body(data: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The body the client sent, as LiteLLM recorded it (no key, none of LiteLLM's own fields), with the messages
    as they came: what a shadow call sends again."""
    request = data.get("proxy_server_request")
    sent = request.get("body") if isinstance(request, Mapping) else None
    kept = {}
    for name, value in sent.items() if isinstance(sent, Mapping) else ():
        if name in _NOT_THE_CLIENTS or name.startswith("litellm"):
            continue
        try:
            json_text.dumps(value, compact=True)
        except (TypeError, ValueError):  # an object LiteLLM put there (its key's record), not the client's
            continue
        kept[name] = value
    return {**kept, "model": body.get("model"), "messages": body.get("messages")}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
