"""``benchmarks._wait_events``: the run-phase sampler names what the server's backends wait
for. A backend blocked on a lock another holds counts as "lock" in every sample, the holder
(idle inside its transaction) as "idle in txn", a sleeping one as "other wait" (not CPU), and
the sampler leaves out its own connection (else each sample would see one backend on CPU: its
own query).

The sampler counts every client backend of its database, so each test samples a database of
its own: a statement an earlier test gave up on can still be running in the shared one (CI
once counted such a backend on CPU in every sample)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from benchmarks._wait_events import sampled
from tests.storage.migration_db import fresh_database
from tests.storage.observe import until, until_true

BLOCKED = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock'
"""
SLEEPING = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event = 'PgSleep'
"""


@pytest.fixture
async def dsn(migrated_dsn: str) -> AsyncIterator[str]:
    async with fresh_database(migrated_dsn, "awa_waits") as own:
        yield own


async def three_samples(dsn: str) -> tuple[dict[str, int], int]:
    """The sampler's counts per class over (at least) three samples, and how many it took."""
    async with sampled(dsn) as found:
        await until_true(lambda: found.samples >= 3)
        return dict(found.counts), found.samples


async def test_a_lock_wait_and_its_holder_are_told_apart(dsn: str) -> None:
    holder, waiter, checker = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        async with holder.transaction():
            await holder.execute("SELECT pg_advisory_xact_lock(4242)")
            blocked = asyncio.create_task(waiter.execute("SELECT pg_advisory_xact_lock(4242)"))

            async def waiting() -> bool:
                return int(await checker.fetchval(BLOCKED)) == 1

            await until(waiting)
            counts, samples = await three_samples(dsn)
        await blocked
    finally:
        for conn in (holder, waiter, checker):
            await conn.close()
    assert counts["lock"] == samples
    assert counts["idle in txn"] == samples
    assert counts.get("cpu", 0) == 0


async def test_a_sleeping_backend_waits_rather_than_runs(dsn: str) -> None:
    sleeper, checker = [await asyncpg.connect(dsn) for _ in range(2)]
    try:
        pid = sleeper.get_server_pid()
        # Cancelled once sampled; 60 s bounds it if the test stops before that.
        sleep = asyncio.create_task(sleeper.execute("SELECT pg_sleep(60)"))

        async def sleeping() -> bool:
            return int(await checker.fetchval(SLEEPING)) == 1

        await until(sleeping)
        counts, samples = await three_samples(dsn)
        await checker.execute("SELECT pg_cancel_backend($1)", pid)
        with pytest.raises(asyncpg.QueryCanceledError):
            await sleep
    finally:
        for conn in (sleeper, checker):
            await conn.close()
    assert counts["other wait"] == samples
    assert counts.get("cpu", 0) == 0
