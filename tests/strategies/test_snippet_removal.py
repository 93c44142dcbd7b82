"""`fact` cuts each sentence it has used out of its document: the cut matches across whitespace and case as
a pattern of the words joined by `\\s+` would, in linear time on any text."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.evidence import normalize, remove_snippet
from strategies.request import Document

_SPACE = re.compile(r"\s+")


def by_pattern(text: str, snippet: str) -> str:
    """What the cut was defined as: the snippet's words joined by `\\s+`, case-insensitive, first match."""
    words = [re.escape(w) for w in normalize(snippet).split(" ") if w]
    if not words:
        return text
    cut = re.compile(r"\s+".join(words), re.IGNORECASE).sub(" ", text, count=1)
    return _SPACE.sub(" ", cut).strip()


texts = st.text(alphabet="abAB \n", max_size=40)


@settings(max_examples=500, deadline=None)
@given(texts, texts)
def test_the_cut_is_the_one_the_pattern_makes(text: str, snippet: str) -> None:
    assert remove_snippet(Document(text=text), snippet).text == by_pattern(text, snippet)


def test_a_sentence_is_cut_out_whatever_its_spacing_and_case() -> None:
    document = Document(text="Paris is  the capital.\nIt has   the Louvre museum.", title="France")
    cut = remove_snippet(document, "it has the LOUVRE museum")
    assert cut.text == "Paris is the capital. ."
    assert cut.title == "France"


def test_a_long_snippet_in_an_adversarial_megabyte_is_cut_in_linear_time() -> None:
    text = "a " * 500_000 + "b"
    snippet = "a " * 2000 + "c"
    started = time.process_time()
    cut = remove_snippet(Document(text=text), snippet)
    # The pattern retried 2,000 words at each of 500,000 positions (about 12 s); one pass takes a fraction of one.
    assert time.process_time() - started < 2
    assert cut.text == _SPACE.sub(" ", text).strip()
