"""How the linear-time tests time their work: this thread's CPU time with the garbage collector paused.

After the whole suite, json-arrays (333k lists) measured 4.9 s of process time and still 4.7 s of its own
thread's time against 0.3 s alone: threads that earlier tests left running were counted by the first clock,
and collections of what earlier tests left in the process by the second. Neither is the parser's cost (the
proxy itself runs with its start-up heap frozen), and a collection triggered by chance inside a timed block
made the result depend on the order the tests ran in."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def cpu_clock() -> Iterator[Callable[[], float]]:
    """`with cpu_clock() as elapsed:` ... `elapsed()` is the seconds of this thread's CPU time so far."""
    enabled = gc.isenabled()
    gc.disable()
    started = time.thread_time()
    try:
        yield lambda: time.thread_time() - started
    finally:
        if enabled:
            gc.enable()
