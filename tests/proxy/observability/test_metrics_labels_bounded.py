"""A request can never break `/metrics`: a model name that is too long, unprintable or not encodable
becomes the label `invalid`, and every scrape still succeeds."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.proxy.observability.metrics import ProxyMetrics
from tests.fakes import FakeUpstream
from tests.serving import chat


@pytest.mark.parametrize("model", ["\ud800", "a\nb", "x" * 500, "tab\tname"])
def test_an_invalid_model_name_folds_into_one_label(model: str) -> None:
    metrics = ProxyMetrics()
    assert metrics.model_label(model) == "invalid"


def test_scrapes_succeed_after_requests_with_hostile_model_names(client: Any, fake: FakeUpstream) -> None:
    for model in ["a\nb", "x" * 500, 'q"uote', "\u202egnp"]:
        client.post("/v1/chat/completions", json={**chat(), "model": model})
    scrape = client.get("/metrics")
    assert scrape.status_code == 200
    assert 'model="invalid"' in scrape.text
