"""The test process's garbage collector: what a full run leaves in it, and how each test gives it back.

A full run imports torch, transformers, LangChain, LlamaIndex and DSPy (framework fixtures, the embedder's
tests): ~1.5M objects that live as long as the process. Left in the collector's oldest generation, every full
collection walks all of them, so a test late in the run paid for every framework imported before it (a
megabyte prompt's parse measured 15x slower after the frameworks than alone). After collection the session
freezes what is alive (`freeze_session_heap`), as the proxy freezes its own start-up heap (`gc_tuned`), and each
test that froze more (an app built with `gc_tuned`) has what it froze freed (`unfreeze_what_the_test_froze`),
without leaving the session's heap unfrozen for the tests after it. (`gc.get_freeze_count()` walks the frozen
objects, 78 ms for 540k here: too slow to ask around every test, so the app's freeze itself says when.)
"""

from __future__ import annotations

import gc
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CollectorState:
    """What a test may change: the generations' thresholds and how many objects are frozen."""

    threshold: tuple[int, int, int]
    frozen: int

    @classmethod
    def now(cls) -> CollectorState:
        return cls(gc.get_threshold(), gc.get_freeze_count())


def freeze_session_heap() -> int:
    """Collect, then freeze every object alive (the modules and frameworks collection imported); returns how
    many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def unfreeze_what_the_test_froze() -> None:
    """After a test that froze objects (an app built with `gc_tuned`): what it left behind is unfrozen and
    collected (a frozen object is never freed), and what survives that (the session's heap, and whatever the test
    keeps alive for good) is frozen again. A full collection of the run's heap: only for tests that froze."""
    gc.unfreeze()
    freeze_session_heap()
