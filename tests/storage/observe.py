"""Waiting for a state another task reaches, where the engine offers nothing to await."""

from __future__ import annotations

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
