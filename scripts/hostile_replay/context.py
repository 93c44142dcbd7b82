"""The run as every case sees it: where the proxy is, the fake upstream (in the local mode), and the few
ways of sending a request the cases share."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from hostile_replay import raw_http
from hostile_replay.fake_upstream import FakeUpstream, Handler, Seen
from hostile_replay.http_client import http_send
from hostile_replay.knobs import Knobs
from hostile_replay.reply import READ_CAP, Reply

Verdict = tuple[bool, str]
"""What a case concludes: OK or a defect, and what it observed."""


@dataclass
class Ctx:
    url: str
    knobs: Knobs
    client: httpx.AsyncClient
    model: str = "hostile-model"
    auth: dict[str, str] = field(default_factory=dict)
    upstream: FakeUpstream | None = None
    proxy: subprocess.Popen[bytes] | None = None
    proxy_log: Path | None = None
    key: str = ""
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def netloc(self) -> str:
        return urlsplit(self.url).netloc

    def script(self, handler: Handler) -> None:
        assert self.upstream is not None
        self.upstream.handler = handler

    def mark(self) -> int:
        return self.upstream.mark() if self.upstream else 0

    def seen(self, mark: int) -> list[Seen]:
        return self.upstream.since(mark) if self.upstream else []

    def chat_calls(self, mark: int) -> list[Seen]:
        return [s for s in self.seen(mark) if s.raw_path.endswith(b"/chat/completions")]

    def nothing_upstream(self, mark: int, ok: bool, observed: str) -> Verdict:
        """The verdict, also requiring that the upstream received nothing (where this run can see it)."""
        if self.upstream is None:
            return ok, f"{observed}, upstream not observed"
        seen = self.seen(mark)
        if not seen:
            return ok, f"{observed}, upstream saw nothing"
        return False, f"{observed}, upstream got {len(seen)}: {ascii(seen[0].target)[:70]}"

    async def refused(self, request: Awaitable[Reply]) -> Verdict:
        """OK if `request` (not yet started) gets a 400 envelope and the upstream receives nothing."""
        mark = self.mark()
        reply = await request
        return self.nothing_upstream(mark, reply.envelope(400), reply.describe())

    def chat_body(self, content: Any = "Say hi.", **extra: Any) -> bytes:
        body = {"model": self.model, "messages": [{"role": "user", "content": content}], "max_tokens": 8, **extra}
        return json.dumps(body).encode()

    async def send(
        self, method: str, path: str, *, headers: Mapping[str, str] | None = None, content: bytes | None = None,
        within: float = 20.0, cap: int = READ_CAP,
    ) -> Reply:  # fmt: skip
        all_headers = {**self.auth, **({"content-type": "application/json"} if content is not None else {})}
        return await http_send(self.client, method, path, headers={**all_headers, **(headers or {})},
                               content=content, within=within, cap=cap)  # fmt: skip

    async def chat(self, content: bytes, headers: Mapping[str, str] | None = None, within: float = 20.0) -> Reply:
        return await self.send("POST", "/v1/chat/completions", headers=headers, content=content, within=within)

    async def chat_seen(self, content: bytes, headers: Mapping[str, str] | None = None) -> tuple[Reply, list[Seen]]:
        """The reply, and the chat calls the upstream received while the proxy answered it."""
        mark = self.mark()
        reply = await self.chat(content, headers)
        return reply, self.chat_calls(mark)

    async def call(self, route: str, *, headers: Mapping[str, str] | None = None, **fields: Any) -> Reply:
        """One ordinary request on a named route, with extra body fields."""
        if route in ("models", "files"):
            return await self.send("GET", f"/v1/{route}", headers=headers)
        if route == "chat":
            return await self.chat(self.chat_body(**fields), headers)
        if route == "embeddings":
            body = {"model": self.model, "input": "hostile", **fields}
        else:
            body = {"model": self.model, "prompt": "Say hi.", "max_tokens": 8, **fields}
        return await self.send("POST", f"/v1/{route}", headers=headers, content=json.dumps(body).encode())

    def raw_request(self, method: str, target: str, headers: Mapping[str, str] | None = None, body: bytes = b"",
                    *, close: bool = True) -> bytes:  # fmt: skip
        fields = list({**self.auth, **(headers or {})}.items())
        if close:
            fields.append(("Connection", "close"))
        if body or method == "POST":
            fields += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        return raw_http.request_head(method, target, self.netloc, fields) + body

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await raw_http.connect(self.url)

    async def exchange(self, writes: Sequence[bytes], *, gap: float = 0.0, wait: float = 5.0,
                       until_close: bool = False) -> Reply:  # fmt: skip
        return await raw_http.exchange(self.url, writes, gap=gap, wait=wait, until_close=until_close)
