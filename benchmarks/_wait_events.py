"""Where the server's side of a run goes: its client backends sampled from pg_stat_activity.

Issue #28 asks where the run phase's idle time goes. The client's busy share is its CPU over
the wall clock; this samples the other side every ``INTERVAL`` seconds from a connection of
its own and counts, per sample, the run's backends in each class: on CPU, waiting for the WAL
or other I/O (a commit's flush), on a lightweight lock, on a heavyweight lock (a lane or a
row), on anything else (the client taking its results, a sleep, another process), idle inside
a transaction (waiting for the client's next statement) and idle (the pool's spares). Mean
backends per class over the samples is the table's unit. The sampler adds a query every
``INTERVAL`` to the server's CPU (not measured apart): run it only when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg

INTERVAL = 0.02
CLASSES = ("cpu", "wal/io", "lwlock", "lock", "other wait", "idle in txn", "idle")

SAMPLE = """
SELECT state, wait_event_type, wait_event FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND backend_type = 'client backend'
"""


def classify(state: str | None, wait_type: str | None, wait_event: str | None) -> str:
    """One backend's class: what it is doing or waiting for at the sample."""
    if state == "idle in transaction":
        return "idle in txn"
    if state != "active":
        return "idle"
    if wait_type is None:
        return "cpu"
    if wait_type == "IO" or (wait_event or "").startswith("WAL"):
        return "wal/io"
    return {"LWLock": "lwlock", "Lock": "lock"}.get(wait_type, "other wait")


@dataclass(slots=True)
class WaitSample:
    """Counts of backends per class, summed over ``samples`` samples."""

    samples: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def mean(self, name: str) -> float:
        """Mean backends in class ``name`` per sample."""
        return self.counts[name] / self.samples if self.samples else 0.0


@contextlib.asynccontextmanager
async def sampled(dsn: str) -> AsyncIterator[WaitSample]:
    """Sample the database's client backends while the block runs."""
    found = WaitSample()
    conn = await asyncpg.connect(dsn, server_settings={"application_name": "awa-bench-sampler"})

    async def loop() -> None:
        while True:
            for row in await conn.fetch(SAMPLE):
                found.counts[classify(row[0], row[1], row[2])] += 1
            found.samples += 1
            await asyncio.sleep(INTERVAL)

    task = asyncio.create_task(loop())
    try:
        yield found
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await conn.close()
