"""Scoring, as each paper scores.

- `best_subspan_em` (Lost in the Middle, multi-document QA): the prediction cut at its first newline, both
  sides normalised SQuAD-style (lower case, punctuation and the articles a/an/the removed, whitespace
  collapsed); 1 if any gold answer is a substring of the prediction. A reply in DSPy's field layout (the
  `dspy` prompt shape asks for one) is read as DSPy reads it first: its `answer` field alone.
- `substring_match` (Lost in the Middle, key-value retrieval): 1 if the value occurs in the output as is.
- `numeric_match` (Du et al., arithmetic): 1 if the last number in the output equals the gold number.
- `value_recall` (FACT / RULER multi-value needles): the share of gold values that occur in the output.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence

AGREEMENT_METRIC = "same_answer"
"""The replay's score of agreement with the served answer: not accuracy, so no lift or verdict is read from it."""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
# dspy/adapters/chat_adapter.py, `field_header_pattern`, matched at the start of a stripped line.
_DSPY_FIELD_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]")


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def best_subspan_em(prediction: str, gold_answers: Iterable[str]) -> float:
    """1.0 if a normalised gold answer occurs in the normalised first line of the prediction, else 0.0.

    As the paper's evaluation does, the cut comes first: a prediction that starts with a newline has an empty
    first line and scores 0. A reply with a DSPy `answer` field is cut within that field (`dspy_field`).
    """
    first_line = normalize_answer(dspy_field(prediction, "answer").split("\n")[0].strip())
    return float(any(normalize_answer(answer) in first_line for answer in gold_answers))


def holds_answer(text: str, gold_answers: Iterable[str]) -> bool:
    """Whether `text` holds a gold answer as `best_subspan_em` matches one: a normalised answer occurs in the
    normalised text (the whole text, not its first line). An answer that normalises to nothing occurs
    everywhere, as it does in the metric."""
    normalised = normalize_answer(text)
    return any(normalize_answer(answer) in normalised for answer in gold_answers)


def dspy_field(reply: str, name: str) -> str:
    """Field `name` of a reply in DSPy's ChatAdapter layout, as `ChatAdapter.parse` reads it: the rest of the
    line that opens with `[[ ## name ## ]]` and the lines after it, up to the next field's header, stripped.
    A reply without that field is returned as it is. Unlike DSPy, an indented header's line is cut where its
    header ends: DSPy cuts it at the header's end in the stripped line and so keeps the header's last characters.
    """
    field: list[str] | None = None
    for line in reply.splitlines():
        header = _DSPY_FIELD_HEADER.match(line.strip())
        if header is None:
            if field is not None:
                field.append(line)
        elif field is not None:
            break
        elif header[1] == name:
            field = [line.strip()[header.end() :]]
    return reply if field is None else "\n".join(field).strip()


def substring_match(prediction: str, value: str) -> float:
    """1.0 if `value` occurs in the prediction exactly as written."""
    return float(value in prediction)


def numeric_match(prediction: str, gold: float) -> float:
    """1.0 if the last number in the prediction (thousands separators allowed) equals `gold`."""
    numbers = _NUMBER.findall(prediction)
    if not numbers:
        return 0.0
    try:
        return float(abs(float(numbers[-1].replace(",", "")) - gold) < 1e-6)
    except ValueError:
        return 0.0


def value_recall(prediction: str, gold_values: Sequence[str]) -> float:
    """The share of gold values that occur in the prediction."""
    if not gold_values:
        return 0.0
    return sum(value in prediction for value in gold_values) / len(gold_values)
