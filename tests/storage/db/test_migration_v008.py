"""Migration v008: a queue-storage schema dropped by hand (``DROP SCHEMA ... CASCADE``) can be
installed again (its registry row made the installer return at once), later migrations pass
over a dropped schema, and an upgrade from v007 forgets the schemas dropped before it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.db.migrator import install_schema, migrate
from storage.db.pool import connect_once
from storage.testing import work_one
from tests.storage.migration_db import database_at

REGISTERED = "SELECT count(*) FROM awa.queue_storage_registry WHERE schema_name = $1"


class Work(BaseModel):
    n: int


@pytest.fixture
async def v007_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated only to v007, as a deployment is before this migration."""
    async with database_at(pg_dsn, "awa_v007", 7) as dsn:
        yield dsn


async def _runs_a_job(dsn: str, schema: str) -> None:
    async with await Client.connect(dsn, schema) as client:

        @client.task(Work)
        async def work(job: Job[Work]) -> None:
            job.set_output({"n": job.args.n})

        await client.insert(Work(n=1))
        result = await work_one(client)
        assert result is not None
        assert result.row is not None
        assert result.row.state is JobState.COMPLETED
        assert result.output == {"n": 1}


async def test_a_schema_dropped_by_hand_can_be_installed_again(
    migrated_dsn: str, conn: asyncpg.Connection, schema: str
) -> None:
    await conn.execute(f"DROP SCHEMA {schema} CASCADE")
    assert await conn.fetchval(REGISTERED, schema) == 1  # the row outlived it
    listed = await conn.fetchval("SELECT array_agg(s) FROM awa.queue_storage_schemas() AS s")
    assert schema not in listed  # a later migration's tail passes over it
    await install_schema(conn, schema)
    assert await conn.fetchval(REGISTERED, schema) == 1
    await _runs_a_job(migrated_dsn, schema)
    await install_schema(conn, schema)  # installed: a second install changes nothing
    await _runs_a_job(migrated_dsn, schema)


async def test_an_upgrade_forgets_schemas_dropped_before_it(v007_dsn: str) -> None:
    async with connect_once(v007_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('dropped_before_v008')")
        await conn.execute("DROP SCHEMA dropped_before_v008 CASCADE")
        with pytest.raises(asyncpg.InvalidSchemaNameError):  # v007's installer: the bug
            await conn.execute("SELECT awa.install_queue_storage('dropped_before_v008')")
        await migrate(v007_dsn)
        assert await conn.fetchval(REGISTERED, "dropped_before_v008") == 0
        assert await conn.fetchval(REGISTERED, "awa") == 1  # the installed one is kept
        await conn.execute("SELECT awa.install_queue_storage('dropped_before_v008')")
    await _runs_a_job(v007_dsn, "dropped_before_v008")
