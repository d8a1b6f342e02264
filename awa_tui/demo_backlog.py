"""The demo's slow consumer: one queue backs up now and then, so "which queue is backing up"
can be practised on the Queues screen.

Every ``period`` seconds (the first time ``first`` seconds after the demo starts) the handlers
of ``queue`` stall for ``stall`` seconds, as a consumer waiting on a slow dependency would.
The runtime runs at most ``limit`` of them at once, so the queue's other jobs stay available:
its lag (the oldest available job's age) and depth grow, and a burst of uploads meanwhile
makes the depth visible. When the stall ends the queue drains.

``step`` is the schedule's one clock input (seconds since the demo started): the demo's feeder
calls it on every tick, and a test drives it directly instead of waiting minutes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

OTHER_LIMIT = 64
"""Handlers at once on the demo's other queues: far more than their traffic needs."""


@dataclass
class Backlog:
    queue: str = "images"
    first: float = 60.0
    period: float = 300.0
    stall: float = 60.0
    limit: int = 2
    burst: int = 3
    """Uploads the feeder adds on each tick of a stall."""
    flowing: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def __post_init__(self) -> None:
        self.flowing.set()

    def stalled_at(self, elapsed: float) -> bool:
        """Whether the queue's consumer is stalled ``elapsed`` seconds after the start."""
        if elapsed < self.first:
            return False
        return (elapsed - self.first) % self.period < self.stall

    def step(self, elapsed: float) -> bool:
        """Move the schedule to ``elapsed``: stall or release the queue's handlers. Returns
        whether it is stalled."""
        stalled = self.stalled_at(elapsed)
        if stalled:
            self.flowing.clear()
        else:
            self.flowing.set()
        return stalled

    async def wait_turn(self, queue: str) -> None:
        """Called by a handler before its work: waits out a stall of its queue."""
        if queue == self.queue:
            await self.flowing.wait()

    def queue_limits(self, queues: Iterable[str]) -> dict[str, int]:
        """``Client.start(queues=...)`` for the demo: the slow queue capped at ``limit``."""
        return {**dict.fromkeys(queues, OTHER_LIMIT), self.queue: self.limit}
