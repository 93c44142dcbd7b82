"""The eval asks an upstream what it is (/v1/models, llama.cpp's /props, vLLM's /version) and reads the answer within
bounds, whatever the upstream sends: JSON nested 100,000 deep, a /props trickled one byte every half second, or a
gzip-in-gzip /props of a few hundred bytes that inflates to 64 MiB. Each is passed over, and the run goes on knowing
the upstream by what it did read, saying what it did not."""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

import contextlift.eval.identity as identity_module
from contextlift.eval.identity import first_listed_model, identify
from tests.serving import fake_upstream_url

LISTING = b'{"object": "list", "data": [{"id": "m", "object": "model", "root": "/models/a.gguf"}]}'
DEEP = b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def double_gzip(size: int) -> bytes:
    """`size` zero bytes, gzipped twice, compressed a piece at a time (never held whole)."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    piece = b"0" * (1 << 20)
    compressed = b"".join(inner.compress(piece) for _ in range(size // len(piece))) + inner.flush()
    return gzip.compress(compressed, 9)


class FakeDescribingUpstream:
    """A fake upstream: `answers` maps a path to (body, headers, seconds between bytes); others get a 404."""

    def __init__(self, answers: dict[str, tuple[bytes, dict[str, str], float]]) -> None:
        self.answers = answers

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] not in self.answers:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"not found"})
            return
        body, headers, gap = self.answers[scope["path"]]
        raw = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in headers.items())]
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        if not gap:
            await send({"type": "http.response.body", "body": body})
            return
        for byte in body:
            await send({"type": "http.response.body", "body": bytes([byte]), "more_body": True})
            await asyncio.sleep(gap)
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def upstream() -> Iterator[tuple[str, FakeDescribingUpstream]]:
    fake = FakeDescribingUpstream({"/v1/models": (LISTING, {}, 0.0)})
    with fake_upstream_url(fake) as url:
        yield url, fake


def test_json_nested_100000_deep_is_passed_over(upstream: tuple[str, FakeDescribingUpstream]) -> None:
    url, fake = upstream
    fake.answers["/props"] = (DEEP, {}, 0.0)
    known = identify(url, "m", upstream_url=url)
    assert known.details == {"listed": {"id": "m", "object": "model", "root": "/models/a.gguf"}}
    assert any("/props" in reason for reason in known.unread)
    fake.answers["/v1/models"] = (DEEP, {}, 0.0)
    assert identify(url, "m").details == {}
    with pytest.raises(ValueError, match="nested too deep"):
        first_listed_model(url)


def test_a_trickled_props_is_given_up_within_the_deadline(
    upstream: tuple[str, FakeDescribingUpstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(identity_module, "DEADLINE", 2.0, raising=False)
    url, fake = upstream
    fake.answers["/props"] = (b'{"model_path": "/m/a.gguf", "build_info": "b1"}' * 4, {}, 0.5)
    started = time.monotonic()
    known = identify(url, "m", upstream_url=url)
    assert time.monotonic() - started < 6.0
    assert "server" not in known.details
    assert known.details["listed"]["root"] == "/models/a.gguf"
    assert any("/props" in reason and "within 2 s" in reason for reason in known.unread)


@pytest.mark.parametrize(
    ("layers", "reason"), [(1, "1 MiB"), (2, "content-encoding 'gzip, gzip'")], ids=["gzip", "gzip-over-gzip"]
)
def test_a_gzip_bomb_is_bounded_as_it_inflates(
    upstream: tuple[str, FakeDescribingUpstream], layers: int, reason: str
) -> None:
    url, fake = upstream
    bomb = double_gzip(64 << 20) if layers == 2 else gzip.compress(b" " * (64 << 20))
    assert len(bomb) < 128 << 10
    fake.answers["/props"] = (bomb, {"content-encoding": ", ".join(["gzip"] * layers)}, 0.0)
    tracemalloc.start()
    try:
        known = identify(url, "m", upstream_url=url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "server" not in known.details
    # One layer is inflated a piece at a time up to 1 MiB; layers stacked one over another are refused unread.
    assert any("/props" in unread and reason in unread for unread in known.unread)
    assert peak < 16 << 20
