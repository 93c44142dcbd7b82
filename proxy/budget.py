"""A process-wide budget of bytes held in memory for request and upstream bodies.

Every body the proxy buffers (a client's request, an upstream answer read whole) is charged to its request's
lease while the request lives, so the bytes all requests hold at once stay under `max_buffered_bytes`
however many arrive together. Streamed relays hold one chunk at a time and are not charged.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextlift.proxy.errors import MemoryBudgetExhausted


@dataclass(slots=True)
class MemoryBudget:
    """Bytes held by every live request together (one per process; the event loop is single-threaded)."""

    limit: int
    held: int = 0

    def lease(self) -> Lease:
        return Lease(self)


@dataclass(slots=True)
class Lease:
    """One request's share of the budget, given back whole when the request ends."""

    budget: MemoryBudget
    held: int = 0

    def take(self, size: int) -> None:
        """Charge `size` more bytes to this request.

        Raises:
            MemoryBudgetExhausted: the process would hold more than its limit.
        """
        if self.budget.held + size > self.budget.limit:
            raise MemoryBudgetExhausted(
                "the proxy holds as many request and answer bytes as it may (max_buffered_bytes); retry shortly",
                headers={"retry-after": "1"},
            )
        self.budget.held += size
        self.held += size

    def release(self) -> None:
        self.budget.held -= self.held
        self.held = 0
