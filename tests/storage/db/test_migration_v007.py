"""Migration v007: ready_entries is indexed by job_id alone (8 B less WAL per enqueued job).
Installed schemas get the swap, a re-run takes no lock, an upgrade from v006 keeps every job
(waiting, retried and finished), and a lookup by (job_id, run_lease) still reads the index."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import orjson
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState, RetryAfter
from storage.db.migrator import migrate
from storage.db.pool import connect_once
from tests.storage.migration_db import HAS_INDEX, database_at, locks_on_schema
from tests.storage.plans import index_names

NEW, OLD = "ready_entries_job_id_idx", "ready_entries_job_id_run_lease_idx"


class Work(BaseModel):
    n: int


@pytest.fixture
async def v006_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated only to v006, as a deployment is before this migration."""
    async with database_at(pg_dsn, "awa_v006", 6) as dsn:
        yield dsn


async def test_installed_schemas_have_it_and_a_rerun_takes_no_lock(
    conn: asyncpg.Connection, schema: str
) -> None:
    assert await conn.fetchval(HAS_INDEX, NEW)
    assert not await conn.fetchval(HAS_INDEX, OLD)
    async with conn.transaction():
        await conn.execute("SELECT awa.index_ready_by_job_v007($1)", schema)
        locked = await locks_on_schema(conn, schema)
    assert locked == 0


async def test_an_upgrade_from_v006_keeps_every_job(v006_dsn: str) -> None:
    async with connect_once(v006_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('before_v007')")
        assert await conn.fetchval(
            "SELECT to_regclass('before_v007.ready_entries_job_id_run_lease_idx') IS NOT NULL"
        )
    async with await Client.connect(v006_dsn, "before_v007") as client:
        runs: list[int] = []

        @client.task(Work)
        async def handle(job: Job[Work]) -> RetryAfter | None:
            runs.append(job.args.n)
            if job.args.n == 0 and job.attempt == 1:
                return RetryAfter(0)  # a second ready row for the same job
            job.set_output({"n": job.args.n})
            return None

        done, retried = await client.insert_many([Work(n=1), Work(n=0)])
        await client.run_until_idle(maintenance_interval=0.05)
        waiting = await client.insert(Work(n=2))
    assert sorted(runs) == [0, 0, 1]

    assert (await migrate(v006_dsn))[0] == 7
    async with connect_once(v006_dsn) as conn:
        await conn.execute("SET search_path = before_v007")
        assert await conn.fetchval(HAS_INDEX, NEW)
        assert not await conn.fetchval(HAS_INDEX, OLD)
        assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 4
    async with await Client.connect(v006_dsn, "before_v007") as client:
        client.task(Work)(handle)
        for job, attempt in ((done, 1), (retried, 2)):
            row = await client.get_job(job.id)
            assert row is not None
            assert (row.state, row.attempt, row.output) == (
                JobState.COMPLETED,
                attempt,
                {"n": job.args["n"]},
            )
        before = await client.get_job(waiting.id)
        assert before is not None
        assert before.state is JobState.AVAILABLE
        await client.run_until_idle()
        after = await client.get_job(waiting.id)
        assert after is not None
        assert (after.state, after.output) == (JobState.COMPLETED, {"n": 2})


async def test_a_lookup_by_job_and_run_lease_reads_the_job_index(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "INSERT INTO ready_entries (slot, job_id, kind, queue, args, priority, attempt,"
        " run_lease, max_attempts, lane_seq, run_at, created_at)"
        " SELECT 0, n / 2, 'k', 'q', '{}', 2, n % 2, n % 2 + 1, 25, n, now(), now()"
        "   FROM generate_series(0, 19999) n"
    )
    await conn.execute("ANALYZE ready_entries")
    text = await conn.fetchval(
        "EXPLAIN (FORMAT JSON) SELECT * FROM ready_entries WHERE job_id = $1 AND run_lease = $2",
        5000,
        2,
    )
    names = index_names(orjson.loads(text)[0]["Plan"])
    assert names == {"ready_entries_0_job_id_idx"}
    found = await conn.fetch(
        "SELECT attempt FROM ready_entries WHERE job_id = $1 AND run_lease = $2", 5000, 2
    )
    assert [r["attempt"] for r in found] == [1]
