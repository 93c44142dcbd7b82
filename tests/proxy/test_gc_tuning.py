"""Start-up tunes the garbage collector: what is alive after start-up is frozen out of full collections, and young
collections run every `YOUNG_COLLECTION_EVERY` allocations (a full collection walking torch's objects held the
event loop for ~240 ms; the figures are in docs/results/perf/2026-11-24-gc.md).

The test process does the same with what collection imported, and gives the collector back after each test
(`tests/collector.py`): a run that left the frameworks' objects to every full collection made CPU-timed tests
late in the run many times slower than alone."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from litestar.testing import TestClient

from contextlift.proxy import Settings, create_app
from contextlift.proxy.app import YOUNG_COLLECTION_EVERY
from tests.collector import CollectorState, unfreeze_what_the_test_froze
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM


class _Cycle:
    """An object only the collector frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


def test_startup_freezes_what_is_alive_and_collects_young_objects_less_often(make_client: Any) -> None:
    survivor = _Cycle()
    assert any(o is survivor for o in gc.get_objects())
    make_client(gc_tuned=True)
    assert gc.get_threshold()[0] == YOUNG_COLLECTION_EVERY
    assert not any(o is survivor for o in gc.get_objects())  # a collection no longer walks it


def leaves_the_collector_alone(before: CollectorState) -> bool:
    # A frozen object whose last reference goes is freed all the same: the count may fall, never grow.
    now = CollectorState.now()
    return now.threshold == before.threshold and now.frozen <= before.frozen


def test_off_keeps_pythons_defaults(make_client: Any) -> None:
    before = CollectorState.now()
    make_client(gc_tuned=False)
    assert leaves_the_collector_alone(before)


def test_the_session_heap_is_frozen_before_the_first_test() -> None:
    # Modules imported at collection (this one, pytest's, the proxy's) are out of the collector's reach.
    assert gc.get_freeze_count() > 10_000
    assert not any(o is _Cycle for o in gc.get_objects())


def test_apps_built_by_tests_leave_the_collector_alone_unless_asked(make_client: Any, fake: FakeUpstream) -> None:
    before = CollectorState.now()
    make_client()
    with TestClient(create_app(Settings(upstream_url=UPSTREAM), transport=fake.transport(), embedder=FakeEmbedder())):
        pass
    assert leaves_the_collector_alone(before)


def test_what_a_tuned_app_froze_is_freed_after_the_test_and_the_session_heap_stays_frozen(make_client: Any) -> None:
    before = CollectorState.now()
    left = _Cycle()
    gone = weakref.ref(left)
    make_client(gc_tuned=True)
    assert gc.get_freeze_count() > before.frozen
    del left
    unfreeze_what_the_test_froze()
    gc.set_threshold(*before.threshold)
    assert gone() is None  # it was frozen by the app's start-up: only unfreezing lets it be freed
    assert gc.get_threshold() == before.threshold
    assert gc.get_freeze_count() > 10_000
    assert not any(o is _Cycle for o in gc.get_objects())  # the session's objects are frozen again
