"""Start-up tunes the garbage collector: what is alive after start-up is frozen out of full collections, and young
collections run every `YOUNG_COLLECTION_EVERY` allocations (a full collection walking torch's objects held the
event loop for ~240 ms; the figures are in docs/results/perf/2026-11-24-gc.md)."""

from __future__ import annotations

import gc
from typing import Any

from proxy.app import YOUNG_COLLECTION_EVERY


def test_startup_freezes_what_is_alive_and_collects_young_objects_less_often(make_client: Any) -> None:
    class Survivor:
        pass

    survivor = Survivor()
    assert any(o is survivor for o in gc.get_objects())
    make_client()
    assert gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY
    assert not any(o is survivor for o in gc.get_objects())  # a collection no longer walks it


def test_off_keeps_pythons_defaults(make_client: Any) -> None:
    threshold = gc.get_threshold()
    make_client(gc_tuned=False)
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == 0
