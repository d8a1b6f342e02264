"""A runtime's first start in a process freezes the heap it finds (``storage.runtime.heap``): once,
after collecting the garbage there is, and not at all with ``gc_freeze=False``.

The process-wide flag is reset per test (``monkeypatch``), so each test sees a process that
has not frozen yet, whatever ran before it. An object is frozen when the collector no longer
lists it among its generations (``gc.get_objects()`` leaves the permanent one out).
"""

from __future__ import annotations

import gc
import weakref

import pytest

from storage import Client
from storage.runtime import heap


class Marker:
    """A tracked object whose place (a generation, or frozen) the tests look up."""


def frozen(obj: object) -> bool:
    assert gc.is_tracked(obj)
    return not any(o is obj for o in gc.get_objects())


@pytest.fixture
def unfrozen_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_frozen", False)


@pytest.mark.usefixtures("unfrozen_process")
async def test_the_first_start_freezes_what_is_alive_and_later_starts_freeze_nothing(
    client: Client,
) -> None:
    before = Marker()
    assert not frozen(before)
    await client.start()
    assert frozen(before)
    await client.shutdown()
    between = Marker()
    await client.start()  # the second start of the process
    await client.shutdown()
    assert not frozen(between)
    assert frozen(before)


@pytest.mark.usefixtures("unfrozen_process")
async def test_gc_freeze_false_leaves_the_collector_alone_and_a_later_start_still_freezes(
    client: Client,
) -> None:
    kept = Marker()
    await client.start(gc_freeze=False)
    await client.shutdown()
    assert not frozen(kept)
    await client.start()  # the opt-out did not use up the process's one freeze
    await client.shutdown()
    assert frozen(kept)


@pytest.mark.usefixtures("unfrozen_process")
async def test_garbage_cycles_are_collected_before_the_freeze_not_frozen(client: Client) -> None:
    cycle = Marker()
    cycle.__dict__["self"] = cycle  # reclaimable by the cyclic collector only
    gone = weakref.ref(cycle)
    gc.disable()  # no automatic collection reclaims it first: only the start's own can
    try:
        del cycle
        assert gone() is not None
        await client.start()
        assert gone() is None
    finally:
        gc.enable()
        await client.shutdown()
