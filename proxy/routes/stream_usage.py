"""`stream_options.include_usage` for upstreams that ignore it (llama.cpp's server among them).

When a client asks for the usage chunk and the stream ends without one, the proxy adds it, counting tokens
with the tokenizer seam and marking it `"estimated": true`. Upstreams that send their own are relayed as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextlift.strategies.tokens import Tokenizer


class StreamUsage:
    """Watches a relayed stream's chunks; `missing_chunk` is the usage chunk to add, if one is owed."""

    def __init__(
        self, body: Mapping[str, Any], tokenizer: Tokenizer, prior_usage: Mapping[str, int] | None = None
    ) -> None:
        self._prior = dict(prior_usage or {})
        options = body.get("stream_options")
        self.wanted = isinstance(options, Mapping) and options.get("include_usage") is True
        messages = body.get("messages")
        self._messages: Sequence[Any] = messages if isinstance(messages, list) else []
        self._tokenizer = tokenizer
        self._seen = False
        self._text: list[str] = []
        self._last: dict[str, Any] = {}

    def observe(self, data: str) -> None:
        if not self.wanted or self._seen:
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return
        if chunk.get("usage"):
            self._seen = True
            return
        self._last = chunk
        # The upstream's JSON, whatever its shape: a field that is not what a chat chunk holds counts for nothing.
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                self._text.append(delta["content"])

    def missing_chunk(self) -> dict[str, Any] | None:
        """The usage chunk the client asked for and the upstream did not send, else None."""
        if not self.wanted or self._seen:
            return None
        prompt = self._tokenizer.count(_prompt_text(self._messages)) + self._prior.get("prompt_tokens", 0)
        completion = self._tokenizer.count("".join(self._text)) + self._prior.get("completion_tokens", 0)
        return {
            "id": self._last.get("id", "chatcmpl-contextlift"),
            "object": "chat.completion.chunk",
            "created": self._last.get("created", 0),
            "model": self._last.get("model", ""),
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "estimated": True,
            },
        }


def _prompt_text(messages: Sequence[Any]) -> str:
    texts = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return "\n".join(texts)
