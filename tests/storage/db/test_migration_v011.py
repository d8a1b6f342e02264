"""Migration v011: deferred_jobs is indexed by (queue, state), so the queue summaries count a
queue's scheduled and retryable jobs from at most the cap of index entries. Installed schemas
get it, a re-run takes no lock, an upgrade from v010 keeps the deferred jobs, and the count
reads the index rather than scanning every deferred job."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import Client, Job, JobState
from storage.db.migrator import migrate
from storage.db.pool import connect_once
from storage.read import queues
from storage.read.counting import COUNT_CAP
from tests.storage.migration_db import HAS_INDEX, database_at, locks_on_schema
from tests.storage.plans import explain, index_names, seq_scanned

INDEX = "deferred_jobs_queue_state_idx"


@pytest.fixture
async def v010_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated only to v010, as a deployment is before this migration."""
    async with database_at(pg_dsn, "awa_v010", 10) as dsn:
        yield dsn


async def test_installed_schemas_have_it_and_a_rerun_takes_no_lock(
    conn: asyncpg.Connection, schema: str
) -> None:
    assert await conn.fetchval(HAS_INDEX, INDEX)
    async with conn.transaction():
        await conn.execute("SELECT awa.index_deferred_by_queue_v011($1)", schema)
        locked = await locks_on_schema(conn, schema)
    assert locked == 0


async def test_an_upgrade_from_v010_indexes_the_deferred_jobs_it_keeps(v010_dsn: str) -> None:
    async with connect_once(v010_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('before_v011')")
    later = datetime.now(UTC) + timedelta(hours=1)
    async with await Client.connect(v010_dsn, "before_v011") as client:

        @client.task(kind="k")
        async def handle(job: Job[dict[str, Any]]) -> None:
            return None

        await client.insert_many([{}] * 3, kind="k", queue="mail", run_at=later)
    assert (await migrate(v010_dsn))[0] == 11
    async with connect_once(v010_dsn) as conn:
        await conn.execute("SET search_path = before_v011")
        assert await conn.fetchval(HAS_INDEX, INDEX)
        (mail,) = await queues.list_queues(conn)
    assert (mail.queue, mail.counts[JobState.SCHEDULED]) == ("mail", 3)


async def test_the_summary_counts_deferred_jobs_from_the_index(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "INSERT INTO deferred_jobs (job_id, state, kind, queue, args, priority, attempt,"
        " run_lease, max_attempts, run_at, created_at)"
        " SELECT n, 'scheduled', 'k', 'q' || n % 4, '{}', 2, 0, 1, 25,"
        "        now() + interval '1 hour', now()"
        "   FROM generate_series(1, 20000) n"
    )
    await conn.execute("ANALYZE deferred_jobs")
    plan = await explain(
        conn, queues.SUMMARIES, COUNT_CAP, queues.DONE_SCAN_CAP, queues.BATCH_SCAN_CAP
    )
    assert INDEX in index_names(plan)
    assert "deferred_jobs" not in seq_scanned(plan)
    found = {q.queue: q.counts[JobState.SCHEDULED] for q in await queues.list_queues(conn)}
    assert found == {"q0": 5000, "q1": 5000, "q2": 5000, "q3": 5000}
