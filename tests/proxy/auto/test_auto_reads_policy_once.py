"""`auto` reads the policy once per request: a reload while the request's margins are being ranked must not
give its margins one policy and its choice another (which skipped a margin rule). And a client that leaves while
a margin rule's ranking runs cancels that ranking, as it cancels upstream calls."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy import rewrite as choosing
from contextlift.proxy.policy import load_policy
from contextlift.proxy.remote_rankers import ServiceRanker
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.proxy.auto.test_auto_margin import EVIDENCE, STANDS_OUT
from tests.serving import UPSTREAM

IN_FORCE = f"""version = 1
[[rule]]
id = "any-margin"
ranker_margin = [0.0, 1.0]
margin_ranker = "lexical"
strategy = "reorder; ranker=lexical"
{EVIDENCE}
"""
RELOADED = IN_FORCE.replace('id = "any-margin"', 'id = "other-margin"').replace(
    'margin_ranker = "lexical"', 'margin_ranker = "client"'
)


def test_a_reload_during_the_margins_does_not_change_the_requests_policy(
    make_client: Any, fake: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "policy.toml").write_text(IN_FORCE)
    (tmp_path / "reloaded.toml").write_text(RELOADED)
    client = make_client(policy_file=str(tmp_path / "policy.toml"))
    state = client.app.state["proxy"]
    reloaded = load_policy(tmp_path / "reloaded.toml", state.resolve)
    margins = choosing._margins

    async def reloading_meanwhile(*args: Any) -> Any:
        state.policy = reloaded  # as a reload between the margins and the choice would
        return await margins(*args)

    monkeypatch.setattr(choosing, "_margins", reloading_meanwhile)
    response = client.post("/v1/chat/completions", json=STANDS_OUT, headers={"X-Context-Strategy": "auto"})
    assert response.headers["x-context-policy"].startswith("rule=any-margin; margin=")


async def test_a_client_that_leaves_cancels_the_margin_ranking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hanging_service(self: ServiceRanker, question: str, documents: Any) -> list[float]:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return []

    monkeypatch.setattr(ServiceRanker, "_scores", hanging_service)  # a fake service that never answers
    (tmp_path / "policy.toml").write_text(IN_FORCE.replace('"lexical"', '"svc"'))
    settings = Settings(
        upstream_url=UPSTREAM,
        policy_file=str(tmp_path / "policy.toml"),
        rankers={"svc": {"kind": "rerank", "url": "http://ranker.test/rerank", "timeout": 60}},
    )
    fake = FakeUpstream()
    app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
    payload = json.dumps(STANDS_OUT).encode()
    gone = asyncio.Event()
    messages = [{"type": "http.request", "body": payload, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"", "root_path": "",
        "client": ("127.0.0.1", 1), "server": ("testserver", 80), "state": {},
        "headers": [(b"content-type", b"application/json"), (b"x-context-strategy", b"auto"),
                    (b"content-length", str(len(payload)).encode())],
    }  # fmt: skip
    async with asyncio.timeout(10):
        handling = asyncio.ensure_future(app(scope, receive, send))  # type: ignore[arg-type]
        await started.wait()
        gone.set()
        await asyncio.wait_for(cancelled.wait(), 2)
        await asyncio.gather(handling, return_exceptions=True)
    assert fake.requests == []
