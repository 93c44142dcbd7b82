"""The path a newcomer reads from the README to a first strategy and a first eval stays short: the README, Getting
started and Evaluate together under 6,000 words. What is reference (every option, every report file, the reference
runs) lives on pages of its own, linked from there."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE_PATH = ["README.md", "docs/getting-started.md", "docs/eval.md"]
MOST_WORDS = 6_000


def test_the_core_path_is_under_six_thousand_words() -> None:
    words = {page: len((ROOT / page).read_text(encoding="utf-8").split()) for page in CORE_PATH}
    assert sum(words.values()) < MOST_WORDS, f"the core path holds {sum(words.values())} words: {words}"
