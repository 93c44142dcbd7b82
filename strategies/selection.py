"""The strategy selection grammar shared by the `X-Context-Strategy` header, the `context_strategy` field and
per-model defaults.

    selection = step *( "," step )
    step      = name *( ";" key "=" value )

For example `reorder; order=edges-last, medoid; k=5`. Names and keys are lower case letters, digits and
dashes; values are any text without `,`, `;` or `=`. Whitespace around tokens is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SELECTION_LENGTH = 1024
"""Long enough for any real pipeline; a longer value is malformed, not worth parsing."""

_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_VALUE = re.compile(r"[^,;=\s]+")


class StrategySelectionError(ValueError):
    """A strategy selection that cannot be run; the message says why, in words a client can act on."""


class NotAStrategyName(StrategySelectionError):
    """A step whose name is not written as names are (lower case letters, digits, `-`, `_`): whoever knows the
    registered names adds them to the message, as for a name that is well written but unknown."""


@dataclass(frozen=True, slots=True)
class StepRequest:
    """One step as written by the client: a name and its raw parameter values."""

    name: str
    params: dict[str, str]


def parse_selection(text: str) -> list[StepRequest]:
    """Parse a selection into its steps, without checking names against any registry.

    Raises:
        StrategySelectionError: the text does not follow the grammar.
    """
    if len(text) > MAX_SELECTION_LENGTH:
        raise StrategySelectionError(f"strategy selection longer than {MAX_SELECTION_LENGTH} characters")
    if not text.strip():
        raise StrategySelectionError("empty strategy selection; use 'none' to disable strategies")
    steps = []
    for position, raw_step in enumerate(text.split(","), start=1):
        name, *assignments = (token.strip() for token in raw_step.split(";"))
        if not _NAME.fullmatch(name):
            lower = f" (names are lower case: {name.lower()!r})" if _NAME.fullmatch(name.lower()) else ""
            raise NotAStrategyName(f"step {position}: {name!r} is not a strategy name{lower}")
        params: dict[str, str] = {}
        for assignment in assignments:
            key, equals, value = (part.strip() for part in assignment.partition("="))
            if not equals or not _NAME.fullmatch(key) or not _VALUE.fullmatch(value):
                raise StrategySelectionError(f"step {position} ({name}): expected key=value, got {assignment!r}")
            if key in params:
                raise StrategySelectionError(f"step {position} ({name}): parameter {key!r} given twice")
            params[key] = value
        steps.append(StepRequest(name, params))
    return steps
