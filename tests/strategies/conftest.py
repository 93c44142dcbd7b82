"""The strategies' own tests run their ranked steps on every ranking: they test what a step does when it acts, on
documents of a few words whose margins no measurement covered. The gate's own tests
(tests/strategies/test_one_gate_for_every_ranked_step.py) ask for the measured gates by name
(`tests.strategies.gates.MEASURED`)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from contextlift.strategies.rankers import gate
from tests.strategies.gates import MEASURED


@pytest.fixture(autouse=True)
def ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "GATES", MappingProxyType(dict.fromkeys(MEASURED, 0.0)))
