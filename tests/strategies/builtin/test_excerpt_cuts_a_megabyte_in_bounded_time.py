"""`excerpt` quotes the opening of a document of a megabyte by counting only a window of it: a few times the budget's
worth of characters, never the whole document, whatever it is made of (no whitespace, runs of quotes, runs of dots,
whose cl100k tokens are long)."""

from __future__ import annotations

import pytest

from contextlift.strategies.builtin.excerpt import ELISION, MAX_CHARS_PER_TOKEN, bounded, quotation
from contextlift.strategies.tokens import TiktokenTokenizer
from tests.cpu_time import cpu_clock

MB = 1_000_000
CAP = 4096
"""`max_tokens`'s cap: the largest window a request can make it read."""


@pytest.mark.parametrize(
    "text",
    ["x" * MB, '"' * MB, "." * MB, "字" * MB, "gamma ray " * (MB // 10), '"""\n' * (MB // 4)],
    ids=["one-letter", "quotes", "dots", "cjk", "words", "fence-lines"],
)
def test_a_megabyte_is_quoted_within_the_cap_in_well_under_a_second(text: str) -> None:
    tokenizer = TiktokenTokenizer()
    tokenizer.count("warm-up")
    with cpu_clock() as elapsed:
        block = quotation(1, bounded(text, CAP, tokenizer))
    # About 0.25 s for a megabyte of dots (tokens of up to 64 of them) on a loaded 2-core machine.
    assert elapsed() < 1.0
    framing, fence, quoted = block.split("\n", 2)
    assert framing == "Relevant excerpt (from document 1):"
    quoted = quoted.removesuffix(f"\n{fence}")
    assert quoted.endswith(ELISION)
    assert text.startswith(quoted.removesuffix(ELISION))
    assert len(quoted) <= CAP * MAX_CHARS_PER_TOKEN + len(ELISION)
    assert tokenizer.count(quoted) <= CAP
    assert fence not in quoted
