"""Freezing the start-up heap (``gc.freeze``) when a runtime starts, once per process.

A started worker holds tens of thousands of long-lived objects the cyclic garbage collector
tracks (modules, classes, the pool and its codecs, the task registry: ~46k in the benchmark).
Every full collection walks all of them, and the run path's allocations trigger one every
several thousand jobs: 20-60 ms each, most of the collector's ~11% of the client's CPU. Frozen,
they are skipped by every later collection. The price (docs/runtime.md): an object alive at
the freeze that later becomes part of a reference cycle is never reclaimed by the collector.
Plain reference counting still frees everything else, frozen or not.
"""

from __future__ import annotations

import gc

_frozen = False  # this process froze its heap already: a second freeze would only add leaks


def freeze_once() -> bool:
    """Collect the garbage there is now (so none of it is frozen), then freeze what is left;
    the first call in a process only. True when this call froze."""
    global _frozen
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    return True
