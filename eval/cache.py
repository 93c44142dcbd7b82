"""The response cache: one JSON line per answered request, keyed by the request and the strategy, so an
interrupted run resumes where it stopped and a re-run only re-scores."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TextIO


@dataclass(frozen=True, slots=True)
class Answer:
    """The proxy's answer to one request, or how the request failed: a line of the cache, which holds these fields
    in this order."""

    key: str
    """The request's `request_key`."""
    strategy: str
    final: bool
    """Whether a re-run may reuse it: a completion, or an error no retry would change. A request that failed after
    every retry is not final and is not cached."""
    answer: str = ""
    latency_s: float | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    """The upstream's `prompt_tokens` and `completion_tokens`, in the order it reported them."""
    upstream_calls: int | None = None
    applied: str | None = None
    """`X-Context-Strategy` as the proxy answered it. A failure has none, and its line leaves the field out, as the
    cache's lines always have."""
    status: int | None = None
    error: str | None = None
    upstream: str | None = None
    """The fingerprint of the upstream that answered (`eval.identity`); None in a line written before it was kept."""
    run: str | None = None
    """The run that asked (`contextlift.eval.identity.new_run_id`)."""

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Answer:
        """An answer from its cache line; fields the line lacks (or holds as null) take their defaults."""
        return cls(
            key=record["key"],
            strategy=record.get("strategy") or "",
            final=record.get("final", True),
            answer=record.get("answer") or "",
            latency_s=record.get("latency_s"),
            usage=record.get("usage") or {},
            upstream_calls=record.get("upstream_calls"),
            applied=record.get("applied"),
            status=record.get("status"),
            error=record.get("error"),
            upstream=record.get("upstream"),
            run=record.get("run"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: dict(self.usage) if f.name == "usage" else getattr(self, f.name)
            for f in fields(self)
            if f.name != "applied" or self.error is None
        }


def request_key(model: str, strategy: str, body: dict[str, Any]) -> str:
    """Names one request: the same model, strategy and body always give the same key."""
    payload = json.dumps([model, strategy, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    """Entries appended as answers arrive and flushed at once, so a killed run loses at most the requests in
    flight. A torn last line (the process killed mid-write) is skipped on load.

    With `upstream` (a fingerprint) an answer is reused only if that upstream gave it: one from another upstream, or
    from before upstreams were recorded, is asked again, and `reasked` counts those. Each upstream's answers are
    kept apart, so runs that alternate between two upstreams reuse each one's."""

    def __init__(self, path: Path, upstream: str | None = None) -> None:
        self.path = path
        self.upstream = upstream
        self._reasked: set[str] = set()
        self._entries: dict[tuple[str, str | None], Answer] = {}
        self._latest: dict[str, Answer] = {}
        """The last answer to each request, whichever upstream gave it: what a cache without `upstream` reuses."""
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    self._keep(Answer.of(entry))
        self._handle: TextIO | None = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Answer | None:
        if self.upstream is None:
            return self._latest.get(key)
        entry = self._entries.get((key, self.upstream))
        if entry is None and key in self._latest:
            self._reasked.add(key)
        return entry

    def holds(self, key: str) -> bool:
        """Whether `get` would answer `key`, without counting it as asked again."""
        return (key in self._latest) if self.upstream is None else (key, self.upstream) in self._entries

    def answer_for(self, key: str) -> Answer | None:
        """The answer `get` would give, without counting a miss as asked again."""
        return self.get(key) if self.holds(key) else None

    def answers(self) -> list[Answer]:
        """The cached answers this run may reuse (eval.timing fits the upstream's speed on them)."""
        if self.upstream is None:
            return list(self._latest.values())
        return [answer for (_, upstream), answer in self._entries.items() if upstream == self.upstream]

    def keys(self) -> list[str]:
        """The request keys of every cached answer, whichever upstream gave it."""
        return list(self._latest)

    @property
    def reasked(self) -> int:
        """Requests asked again so far because their cached answer came from another upstream."""
        return len(self._reasked)

    def reusable(self) -> int:
        """How many cached answers this run may reuse."""
        if self.upstream is None:
            return len(self._latest)
        return sum(1 for _, upstream in self._entries if upstream == self.upstream)

    def put(self, answer: Answer) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            needs_newline = self.path.exists() and self.path.stat().st_size > 0 and not _ends_with_newline(self.path)
            self._handle = self.path.open("a", encoding="utf-8")
            if needs_newline:
                self._handle.write("\n")
        self._keep(answer)
        self._handle.write(json.dumps(answer.to_json(), ensure_ascii=False) + "\n")
        self._handle.flush()

    def _keep(self, answer: Answer) -> None:
        self._entries[(answer.key, answer.upstream)] = answer
        self._latest[answer.key] = answer

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"
