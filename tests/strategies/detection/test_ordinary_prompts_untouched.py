"""Ordinary chat requests hold no documents: detection finds none in any of them and the body comes back unchanged.

The corpus (`ordinary_prompts.py`) is built from GSM8K, HumanEval and SQuAD (`tests/benchmark_data.py` finds them;
without them this module is skipped) and from seeded generators of everyday prompts: chit-chat, JSON tool results,
markdown notes, configs, stack traces and the like.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contextlift.strategies import parse_request
from tests.strategies.ordinary_prompts import DATA_SOURCES, ordinary_prompts

CASES = ordinary_prompts()


@pytest.mark.parametrize("body", [body for _, body in CASES], ids=[name for name, _ in CASES])
def test_no_documents_are_found_and_the_body_is_untouched(body: dict[str, Any]) -> None:
    original = copy.deepcopy(body)
    chat = parse_request(body)
    found = [(document.title, document.text[:60]) for document in chat.documents]
    assert chat.documents == (), f"detected {chat.block.format if chat.block else None} documents: {found}"
    assert chat.block is None
    assert chat.render() == original
    assert body == original


def test_the_corpus_is_large_and_mostly_real_data() -> None:
    names = [name for name, _ in CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 250
    from_data = [name for name in names if name.split("-", 1)[0] in DATA_SOURCES]
    assert len(from_data) >= 150


def test_the_corpus_is_the_same_on_every_build() -> None:
    assert ordinary_prompts() == CASES
