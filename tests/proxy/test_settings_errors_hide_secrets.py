"""A settings error says which field is wrong and why, never the value given: a value may be a secret (a ranker's
key, the upstream's key, a token in a URL), and pydantic's own text quotes it, a long one cut in its middle with
its tail still visible. Non-finite numbers are refused at start-up rather than failing every request later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextlift.proxy.cli import main

SECRET = "rk-secret-0123456789abcdef"


def start_up_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["serve", *argv]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "rankers",
    [
        {"h3": {"kind": "rerank", "api_key": SECRET}},  # no url
        {"h3": {"kind": "rerank", "url": "http://tei/rerank", "apikey": SECRET}},  # a misspelt field
        {  # long enough that pydantic cuts the value in its middle, its tail (the key) left visible
            **{f"r{i}": {"kind": "rerank", "url": f"http://tei-{i}/rerank", "model": "m" * 150} for i in range(20)},
            "h3": {"kind": "rerank", "url": "http://tei/rerank", "timeout": "soon", "api_key": SECRET},
        },
        {"h3": {"kind": "rerank", "url": f"ftp://tei/rerank?key={SECRET}"}},  # a token in a refused URL
    ],
    ids=["no-url", "misspelt-key", "long", "url-token"],
)
def test_a_ranker_setting_error_never_echoes_its_key(
    rankers: dict[str, object], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CONTEXTLIFT_RANKERS", json.dumps(rankers))
    error = start_up_error(capsys, "--upstream", "http://up/v1")
    assert "invalid settings: rankers.h3" in error
    assert SECRET not in error
    assert SECRET[-8:] not in error


def test_a_key_field_of_the_wrong_type_is_not_echoed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "contextlift.toml"
    config.write_text(f'upstream_url = "http://up/v1"\nupstream_api_key = {{ key = "{SECRET}" }}\n')
    error = start_up_error(capsys, "--config", str(config))
    assert "upstream_api_key" in error
    assert SECRET not in error


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CONTEXTLIFT_UPSTREAM_POOL_WAIT", "inf"),
        ("CONTEXTLIFT_UPSTREAM_TIMEOUT", "nan"),
        ("CONTEXTLIFT_RETRY_MAX_WAIT", "Infinity"),
        ("CONTEXTLIFT_STRATEGY_CAPS", '{"medoid.k": Infinity}'),
        ("CONTEXTLIFT_RANKERS", '{"h3": {"kind": "rerank", "url": "http://tei/rerank", "recovery_seconds": NaN}}'),
    ],
)
def test_a_number_that_is_not_finite_stops_start_up(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, value)
    error = start_up_error(capsys, "--upstream", "http://up/v1")
    assert "finite number" in error
