"""``benchmarks._wait_events``: the run-phase sampler names what the server's backends wait
for. A backend blocked on a lock another holds counts as "lock" in every sample, the holder
(idle inside its transaction) as "idle in txn", and the sampler leaves out its own
connection (else each sample would see one backend on CPU: its own query)."""

from __future__ import annotations

import asyncio

import asyncpg

from benchmarks._wait_events import sampled
from tests.storage.observe import until, until_true

BLOCKED = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock'
"""


async def test_a_lock_wait_and_its_holder_are_told_apart(migrated_dsn: str) -> None:
    holder, waiter, checker = [await asyncpg.connect(migrated_dsn) for _ in range(3)]
    try:
        async with holder.transaction():
            await holder.execute("SELECT pg_advisory_xact_lock(4242)")
            blocked = asyncio.create_task(waiter.execute("SELECT pg_advisory_xact_lock(4242)"))

            async def waiting() -> bool:
                return int(await checker.fetchval(BLOCKED)) == 1

            await until(waiting)
            async with sampled(migrated_dsn) as found:
                await until_true(lambda: found.samples >= 3)
                counts, samples = dict(found.counts), found.samples
        await blocked
    finally:
        for conn in (holder, waiter, checker):
            await conn.close()
    assert counts["lock"] == samples
    assert counts["idle in txn"] == samples
    assert counts.get("cpu", 0) == 0
