"""A strategy cap no request could meet fails the start-up, not every request: one below its parameter's
minimum (each request using the strategy would get a 400), or one naming no numeric parameter of a registered
strategy (a typo that leaves the built-in cap in force unseen). `contextlift serve` exits with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.cli import main
from contextlift.proxy.settings import SettingsError
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM


def build(caps: dict[str, float]) -> Any:
    settings = Settings(upstream_url=UPSTREAM, strategy_caps=caps)
    return create_app(settings, transport=FakeUpstream().transport(), embedder=FakeEmbedder())


@pytest.mark.parametrize(
    ("caps", "reason"),
    [
        ({"medoid.k": 0}, "below the parameter's minimum of 1"),
        ({"recite.max_tokens": 8}, "below the parameter's minimum of 16"),
        ({"medoid.kk": 3}, "no numeric parameter 'kk'"),
        ({"reorder.order": 1}, "no numeric parameter 'order'"),
        ({"medoids.k": 3}, "no strategy 'medoids'"),
        ({"medoid": 3}, "no numeric parameter ''"),
    ],
)
def test_a_cap_no_request_could_meet_fails_the_start(caps: dict[str, float], reason: str) -> None:
    with pytest.raises(SettingsError, match="strategy_caps") as raised:
        build(caps)
    assert reason in str(raised.value)


def test_caps_within_the_parameters_range_start() -> None:
    app = build({"medoid.k": 1, "recite.max_tokens": 16, "chain.chunk_tokens": 1e9})
    assert app.state["proxy"].settings.strategy_caps["medoid.k"] == 1


def test_serve_exits_with_the_reason(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CONTEXTLIFT_STRATEGY_CAPS", '{"medoid.k": 0}')

    def started(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the proxy started serving with a cap no request could meet")

    monkeypatch.setattr("contextlift.proxy.cli.build_server", started)
    status = main(["serve", "--upstream", "http://127.0.0.1:9/v1", "--port", "0"])
    assert status == 1
    assert "below the parameter's minimum" in capsys.readouterr().err
