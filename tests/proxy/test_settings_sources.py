"""Settings: defaults, then the TOML file, then CONTEXTLIFT_* variables, then explicit overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from contextlift.proxy import Settings, SettingsError, create_app, load_settings


def test_env_prefix_sets_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTLIFT_UPSTREAM_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("CONTEXTLIFT_MAX_BODY_BYTES", "4096")
    monkeypatch.setenv("CONTEXTLIFT_DEFAULT_STRATEGIES", '{"*": "none"}')
    settings = load_settings()
    assert settings.upstream_url == "http://vllm:8000/v1"
    assert settings.max_body_bytes == 4096
    assert settings.default_strategies == {"*": "none"}


def test_toml_file_is_overridden_by_env_then_by_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "contextlift.toml"
    config.write_text('upstream_url = "http://from-file/v1"\nport = 9000\nupstream_timeout = 12.5\n')
    assert load_settings(config).upstream_timeout == 12.5
    monkeypatch.setenv("CONTEXTLIFT_PORT", "9100")
    settings = load_settings(config, upstream_url="http://from-flag/v1")
    assert settings.port == 9100
    assert settings.upstream_url == "http://from-flag/v1"
    assert settings.upstream_timeout == 12.5


def test_unreadable_or_invalid_config_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SettingsError):
        load_settings(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("port = 'eighty'\n")
    with pytest.raises(ValidationError):
        load_settings(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("upstream = 'typo'\n")
    with pytest.raises(ValidationError):
        load_settings(unknown)


def test_every_field_is_described() -> None:
    assert all(field.description for field in Settings.model_fields.values())


def test_app_refuses_a_default_strategy_that_does_not_resolve() -> None:
    with pytest.raises(SettingsError, match="default_strategies"):
        create_app(Settings(upstream_url="http://up/v1", default_strategies={"*": "bogus"}))


def test_app_needs_an_upstream() -> None:
    with pytest.raises(SettingsError, match="upstream_url"):
        create_app(Settings(upstream_url=None))


def test_api_key_is_not_in_the_settings_repr() -> None:
    settings = Settings(upstream_url="http://up/v1", upstream_api_key="sk-canary-123456789")
    assert "sk-canary" not in repr(settings)
