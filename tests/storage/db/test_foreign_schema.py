"""``Client.connect`` reads only databases awa-tui migrated, at a version it reads: a database
the real Awa made (same table names, other meanings), an empty one, a ledger from a newer or
another release, or a gap, is refused in one line saying what was found, and nothing stays
open; ``migrate`` refuses to migrate over what another tool made."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from storage import Client, ForeignSchema, SchemaNotMigrated, migrate
from storage.db.migrator import LATEST_VERSION
from storage.db.pool import connect_once
from tests.awa_made import AWA_SCHEMA_VERSION
from tests.storage.migration_db import database_at, fresh_database
from tests.storage.roles import unprivileged_dsn

AWA_LINE = (
    f"this database was made by Awa (schema version {AWA_SCHEMA_VERSION}), not by awa-tui; "
    "awa-tui reads only databases it migrated"
)
RESTORE_LEDGER = """
DELETE FROM awa.schema_migrations;
INSERT INTO awa.schema_migrations (version, name) SELECT version, name FROM ledger_copy;
"""
SESSIONS = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"


@pytest.fixture(scope="module")
async def ledger_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated to this release, whose ledger each test changes and restores."""
    async with database_at(pg_dsn, "awa_ledger", LATEST_VERSION) as dsn:
        async with connect_once(dsn) as conn:
            await conn.execute("CREATE TABLE ledger_copy AS SELECT * FROM awa.schema_migrations")
        yield dsn


async def sessions_on(pg_dsn: str, dsn: str) -> int:
    async with connect_once(pg_dsn) as admin:
        return int(await admin.fetchval(SESSIONS, dsn.rsplit("/", 1)[1].split("?")[0]))


async def test_a_database_awa_made_is_refused_saying_so(pg_dsn: str, awa_made_dsn: str) -> None:
    async with connect_once(awa_made_dsn) as conn:  # what a naive check saw: Awa's tables
        assert await conn.fetchval("SELECT to_regclass('awa.ready_entries') IS NOT NULL")
        failed = "SELECT count(*) FROM awa.jobs WHERE state = 'failed'"
        assert await conn.fetchval(failed) == 1
    for read_only in (False, True):
        with pytest.raises(ForeignSchema) as caught:
            await Client.connect(awa_made_dsn, read_only=read_only)
        assert caught.value.message == AWA_LINE
        assert (caught.value.found, caught.value.version) == ("awa", AWA_SCHEMA_VERSION)
    assert await sessions_on(pg_dsn, awa_made_dsn) == 0  # the pool was closed


async def test_migrate_leaves_a_database_awa_made_as_it_is(awa_made_dsn: str) -> None:
    with pytest.raises(ForeignSchema, match="made by Awa"):
        await migrate(awa_made_dsn)
    async with connect_once(awa_made_dsn) as conn:
        assert not await conn.fetchval("SELECT to_regclass('awa.schema_migrations') IS NOT NULL")
        assert not await conn.fetchval("SELECT to_regclass('awa.queue_storage_registry')")


async def test_an_empty_database_is_not_migrated(pg_dsn: str) -> None:
    async with fresh_database(pg_dsn, "awa_empty") as dsn:
        with pytest.raises(SchemaNotMigrated, match="this database is not migrated"):
            await Client.connect(dsn)
        assert await sessions_on(pg_dsn, dsn) == 0


async def test_other_tables_in_awa_without_a_ledger_are_foreign(pg_dsn: str) -> None:
    async with fresh_database(pg_dsn, "awa_other") as dsn:
        async with connect_once(dsn) as conn:
            await conn.execute("CREATE SCHEMA awa; CREATE TABLE awa.jobs (id bigint)")
        with pytest.raises(ForeignSchema, match="schema awa with 1 tables but no awa-tui") as e:
            await Client.connect(dsn)
        assert e.value.found == "other"
        with pytest.raises(ForeignSchema):
            await migrate(dsn)


@pytest.mark.parametrize(
    ("change", "error", "says"),
    [
        (
            f"INSERT INTO awa.schema_migrations VALUES ({LATEST_VERSION + 1}, 'from_the_future')",
            ForeignSchema,
            f"migrated by a newer awa-tui \\(schema v{LATEST_VERSION + 1:03d}\\); this awa-tui "
            f"reads migrations up to v{LATEST_VERSION:03d}",
        ),
        (
            "UPDATE awa.schema_migrations SET name = 'someone_elses' WHERE version = 2",
            ForeignSchema,
            "records v002 'someone_elses', which this awa-tui does not ship",
        ),
        (
            "DELETE FROM awa.schema_migrations WHERE version = 3",
            SchemaNotMigrated,
            "not fully migrated \\(v003 is missing",
        ),
        ("DELETE FROM awa.schema_migrations", SchemaNotMigrated, "v001 is missing"),
    ],
)
async def test_a_ledger_this_release_does_not_read_is_refused(
    ledger_dsn: str, change: str, error: type[Exception], says: str
) -> None:
    async with await Client.connect(ledger_dsn):
        pass  # as migrated: accepted
    async with connect_once(ledger_dsn) as conn:
        await conn.execute(change)
        try:
            with pytest.raises(error, match=says):
                await Client.connect(ledger_dsn)
        finally:
            await conn.execute(RESTORE_LEDGER)


async def test_a_database_behind_this_release_is_read(pg_dsn: str) -> None:
    """A runtime may run ahead of its migration: v001 alone is a database this release reads."""
    async with database_at(pg_dsn, "awa_behind", 1) as dsn, await Client.connect(dsn) as client:
        assert await client.failure_groups() == []


async def test_a_schema_not_installed_names_how_to_install_it(migrated_dsn: str) -> None:
    with pytest.raises(SchemaNotMigrated, match=r"awa\.install_queue_storage\('elsewhere'\)"):
        await Client.connect(migrated_dsn, "elsewhere")


async def test_a_role_that_may_not_read_awa_is_still_told_it_is_awas(awa_made_dsn: str) -> None:
    """The first look is at the catalogs, which every role may read."""
    async with unprivileged_dsn(awa_made_dsn) as (dsn, _password):
        with pytest.raises(ForeignSchema, match="made by Awa \\(schema version unknown\\)"):
            await Client.connect(dsn)


async def test_an_empty_control_schema_is_not_migrated(pg_dsn: str) -> None:
    async with fresh_database(pg_dsn, "awa_bare") as dsn:
        async with connect_once(dsn) as conn:
            await conn.execute("CREATE SCHEMA awa")
        with pytest.raises(SchemaNotMigrated, match="this database is not migrated"):
            await Client.connect(dsn)
