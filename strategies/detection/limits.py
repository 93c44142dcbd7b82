"""Bounds on the documents one request may carry.

A request's cost in memory and time grows with its documents: every one becomes an object, is scanned,
embedded, counted and rendered. The bounds are checked while the documents are found, before the objects for
a million of them exist, so an oversized request costs little more than reading it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_MAX_SCANNED_CHARS = 2 * 1024 * 1024
"""About 500,000 tokens of English, past what nearly every model reads. A 5 MB context of blank-line runs held the
lock 2.0 to 2.6 s in one search; the scans of a 2 MiB text hold it about 0.35 s each."""


class DocumentLimitError(ValueError):
    """A request carries more documents, or more bytes of documents, than its `DocumentLimits` allow."""


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    """The most documents, and bytes of them, that one request may carry to a strategy."""

    max_documents: int
    """Most documents, whether detected in the messages or given in the `documents` body field."""
    max_document_bytes: int
    """Most UTF-8 bytes of the documents as the request wrote them (text and title for the `documents` field)."""
    max_scanned_chars: int = DEFAULT_MAX_SCANNED_CHARS
    """Longest text of one message (or content part) that detection reads; a longer one is left as it came
    (`none: over-limit`). Each scanner is linear, but one regular-expression search holds the interpreter's lock for
    its whole run, so a search over megabytes stalls every other request of the process, `/healthz` included."""

    def check_count(self, count: int) -> None:
        """Raises `DocumentLimitError` when `count` documents are too many."""
        if count > self.max_documents:
            raise DocumentLimitError(
                f"the request carries more than {self.max_documents} documents, the most this proxy accepts"
            )

    def check_bytes(self, texts: Iterable[str]) -> None:
        """Raises `DocumentLimitError` when `texts` hold more UTF-8 bytes than allowed.

        Stops at the first text past the bound, so the work done is at most the bound, however large the texts.
        """
        remaining = self.max_document_bytes
        for text in texts:
            # A text never has fewer bytes than characters: one longer than what is left is over without encoding.
            remaining -= len(text) if len(text) > remaining else len(text.encode("utf-8", "surrogatepass"))
            if remaining < 0:
                raise DocumentLimitError(
                    f"the request's documents hold more than {self.max_document_bytes} bytes, "
                    "the most this proxy accepts"
                )
