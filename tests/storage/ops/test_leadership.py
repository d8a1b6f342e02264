"""The maintenance leader keeps its lock across passes (``storage.ops.leadership``): one
session leads a fleet's passes, a one-off pass on its client runs on that session, shutdown
gives the lock back before it returns, and when the leader's client closes another runtime
leads the next pass and still rescues an abandoned attempt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta

import asyncpg

from storage import Client, Job, JobState
from storage.db.sql import MAINTENANCE_LEADER_LOCK_CLASS
from storage.ops.maintenance import MaintenanceSettings
from storage.runtime.claim import claim_batch
from tests.storage.observe import until, until_true

FLEET = 3
INTERVAL = 0.05
HOLDERS = f"""
SELECT pid FROM pg_locks
 WHERE locktype = 'advisory' AND classid = {MAINTENANCE_LEADER_LOCK_CLASS}
   AND objid = hashtext($1)::oid AND objsubid = 2 AND granted
"""
ALIVE = "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)"


async def _noop(job: Job[dict[str, int]]) -> None:
    return None


@asynccontextmanager
async def _fleet(
    dsn: str, schema: str, settings: MaintenanceSettings | None = None
) -> AsyncIterator[list[Client]]:
    """``FLEET`` started clients on ``schema``, serving a queue nothing is inserted into."""
    async with AsyncExitStack() as stack:
        clients = []
        for _ in range(FLEET):
            client = await stack.enter_async_context(await Client.connect(dsn, schema))
            client.task(kind="m_parked", queue="parked")(_noop)  # inserted, never run here
            client.task(kind="m_orphan", queue="orphans")(_noop)
            await client.start(["fleet"], maintenance_interval=INTERVAL, maintenance=settings)
            clients.append(client)
        yield clients


def _leaders(clients: list[Client]) -> Callable[[], list[Client]]:
    return lambda: [c for c in clients if c.session.leader.leading]


async def _holders(conn: asyncpg.Connection, schema: str) -> list[int]:
    return [row["pid"] for row in await conn.fetch(HOLDERS, schema)]


async def _a_pass_promotes(client: Client, conn: asyncpg.Connection) -> None:
    """Make a deferred job due and wait until some pass promoted it."""
    job = await client.insert({"n": 1}, kind="m_parked", queue="parked", run_at=_later())
    await conn.execute("UPDATE deferred_jobs SET run_at = now() WHERE job_id = $1", job.id)

    async def promoted() -> bool:
        row = await client.get_job(job.id)
        return row is not None and row.state is JobState.AVAILABLE

    await until(promoted)


def _later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


async def test_one_runtime_keeps_the_lock_across_its_passes(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    async with _fleet(migrated_dsn, schema) as clients:
        leaders = _leaders(clients)
        await until_true(lambda: len(leaders()) == 1)
        (leader,) = leaders()
        held = await _holders(conn, schema)
        assert len(held) == 1

        for _ in range(2):  # passes ran, and the same session holds the lock between them
            await _a_pass_promotes(leader, conn)
            assert await _holders(conn, schema) == held
            assert leaders() == [leader]

        # A one-off pass: on the leader's own session for its client, refused to the others.
        assert (await leader.run_maintenance()).leader is True
        follower = next(c for c in clients if c is not leader)
        assert (await follower.run_maintenance()).leader is False
        assert await _holders(conn, schema) == held

        # Shutdown lets the pass under way end and gives the connection back to the pool with
        # a reset that unlocks: the session is still there, without the lock. (A terminated
        # connection would drop it only once its backend had exited, some time later.)
        await leader.shutdown()
        assert not leader.session.leader.leading
        assert await conn.fetchval(ALIVE, held[0])
        assert held[0] not in await _holders(conn, schema)


async def test_a_closed_leader_hands_over_and_rescue_still_happens(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    settings = MaintenanceSettings(heartbeat_stale_seconds=1.0)
    async with _fleet(migrated_dsn, schema, settings) as clients:
        leaders = _leaders(clients)
        await until_true(lambda: len(leaders()) == 1)
        (first,) = leaders()
        (first_pid,) = await _holders(conn, schema)
        await first.close()
        rest = [c for c in clients if c is not first]

        await until_true(lambda: len(_leaders(rest)()) == 1)
        (second,) = _leaders(rest)()
        (second_pid,) = await _holders(conn, schema)
        assert second_pid != first_pid
        await _a_pass_promotes(second, conn)

        # An attempt nobody heartbeats (claimed here, in a queue no runtime serves).
        job = await second.insert({"n": 2}, kind="m_orphan", queue="orphans")
        async with second.pool.acquire() as c:
            (claimed,) = await claim_batch(c, ["orphans"], 1, 1800.0)
        assert claimed.job_id == job.id

        async def rescued() -> bool:
            outcome = await conn.fetchval(
                "SELECT outcome FROM attempt_closures WHERE job_id = $1", job.id
            )
            return bool(outcome == "rescued")

        await until(rescued, tries=20_000)
        row = await second.get_job(job.id)
        assert row is not None
        assert row.state in {JobState.RETRYABLE, JobState.AVAILABLE}
