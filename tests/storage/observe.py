"""Waiting for a state another task reaches, where the engine offers nothing to await."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def until(check: Callable[[], Awaitable[bool]], *, tries: int = 2000) -> None:
    """Re-check an observable condition, at most ``tries`` times; no sleep.

    Each check is a database round trip, which yields to the event loop, so the task being
    waited for (a handler reaching its ``wait_for_callback``) makes progress in between.
    """
    for _ in range(tries):
        if await check():
            return
    raise AssertionError("the condition was not reached in time")


async def until_true(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Poll an in-process condition another task sets (a handler count, a runtime's state),
    yielding 10 ms between checks, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
