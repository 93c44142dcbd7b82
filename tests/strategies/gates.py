"""The ranker gates as measured and shipped, read before the strategies' tests open them (tests/strategies/conftest.py),
for the tests that check the gate itself."""

from __future__ import annotations

from contextlift.strategies.rankers.gate import GATES

MEASURED = GATES
