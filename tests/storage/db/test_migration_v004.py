"""Migration v004 (queue pause): existing schemas get it, and a runtime that is ahead of it
keeps claiming, refusing only the pause itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from storage import Client, Job, JobState, SchemaNotMigrated
from storage.db.migrator import migrate
from storage.db.pool import connect_once
from tests.storage.migration_db import database_at, locks_on_schema


@pytest.fixture
async def v003_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated only to v003, as a deployment is before the pause migration."""
    async with database_at(pg_dsn, "awa_v003", 3) as dsn:
        yield dsn


async def test_a_runtime_ahead_of_v004_claims_and_refuses_only_the_pause(v003_dsn: str) -> None:
    async with connect_once(v003_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('before_pause')")
    async with await Client.connect(v003_dsn, "before_pause") as client:

        @client.task(kind="k")
        async def handler(job: Job[dict[str, Any]]) -> None:
            return None

        job = await client.insert({}, kind="k")
        await client.run_until_idle()
        row = await client.get_job(job.id)
        assert row is not None
        assert row.state is JobState.COMPLETED
        (summary,) = await client.list_queues()
        assert not summary.paused
        with pytest.raises(SchemaNotMigrated, match="v004"):
            await client.pause_queue("default")

    assert (await migrate(v003_dsn))[0] == 4  # v004, then any later migration
    async with await Client.connect(v003_dsn, "before_pause") as client:
        await client.pause_queue("default")
        (summary,) = await client.list_queues()
        assert summary.paused


async def test_fresh_install_has_the_pause_column_and_time_indexes(
    conn: asyncpg.Connection,
) -> None:
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'queue_settings'::regclass"
            " AND attname IN ('paused', 'paused_at') AND NOT attisdropped"
        )
        == 2
    )
    for index in ("done_entries_finalized_at_idx", "receipt_completion_batches_finalized_at_idx"):
        assert await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", index)


async def test_rerunning_the_v004_tail_takes_no_lock(conn: asyncpg.Connection, schema: str) -> None:
    async with conn.transaction():
        await conn.execute("SELECT awa.add_queue_pause_v004($1)", schema)
        locked = await locks_on_schema(conn, schema)
    assert locked == 0
