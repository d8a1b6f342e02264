"""Migration v002 (the ADR's v052): rollout, re-runs, and a runtime ahead of its migration."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.db.migrator import applied_versions, available_migrations, migrate, migrate_connection
from storage.db.pool import connect_once
from storage.testing import work_one
from tests.storage.metric_points import counter_points
from tests.storage.migration_db import database_at

SHIPPED = [m.version for m in available_migrations()]  # every version, in order


class Work(BaseModel):
    n: int = 0


def _with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture
async def v001_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated only to v001, as a deployment is before the output migration."""
    async with database_at(pg_dsn, "awa_v001", 1) as dsn:
        yield dsn


async def test_migrate_is_idempotent_and_records_versions(migrated_dsn: str) -> None:
    assert await migrate(migrated_dsn) == []
    async with connect_once(migrated_dsn) as conn:
        assert await applied_versions(conn) == set(SHIPPED)


async def test_fresh_install_has_the_output_columns(conn: asyncpg.Connection) -> None:
    columns = await conn.fetch(
        "SELECT attrelid::regclass::text AS rel, attname FROM pg_attribute"
        " WHERE attname IN ('output', 'outputs') AND attrelid IN"
        " ('receipt_completion_batches'::regclass, 'done_entries'::regclass,"
        "  'terminal_jobs'::regclass)"
    )
    assert {(c["rel"].split(".")[-1], c["attname"]) for c in columns} == {
        ("receipt_completion_batches", "outputs"),
        ("done_entries", "output"),
        ("terminal_jobs", "output"),
    }
    last = await conn.fetchval(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'terminal_jobs'::regclass"
        " AND attnum > 0 ORDER BY attnum DESC LIMIT 1"
    )
    assert last == "output"


async def test_rerunning_the_tail_takes_no_lock_on_the_tables(
    conn: asyncpg.Connection, schema: str
) -> None:
    async with conn.transaction():
        await conn.execute("SELECT awa.add_job_output_v002($1)", schema)
        locked = await conn.fetch(
            "SELECT relation::regclass::text AS rel, mode FROM pg_locks"
            " WHERE pid = pg_backend_pid() AND locktype = 'relation'"
            "   AND relation::regclass::text LIKE $1 || '.%'",
            schema,
        )
    assert locked == []


@pytest.mark.parametrize(("before", "after"), [(None, "0"), ("5s", "5s")])
async def test_the_tail_sets_lock_timeout_only_while_it_runs(
    v001_dsn: str, before: str | None, after: str
) -> None:
    """v002 on a database with a pre-v002 schema: the tail runs there (its columns appear)
    and leaves the session's lock_timeout as it found it, unset or set by the caller."""
    async with connect_once(v001_dsn) as conn, conn.transaction():
        await conn.execute("SELECT awa.install_queue_storage('late')")
        if before is not None:
            await conn.execute(f"SET LOCAL lock_timeout = '{before}'")
        assert await conn.fetchval("SHOW lock_timeout") == after
        assert await migrate_connection(conn) == SHIPPED[1:]
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM pg_attribute WHERE attname = 'output' AND NOT attisdropped"
                " AND attrelid = 'late.done_entries'::regclass"
            )
            == 1
        )
        assert await conn.fetchval("SHOW lock_timeout") == after


async def test_v002_migrates_existing_schemas_and_keeps_their_jobs(v001_dsn: str) -> None:
    async with connect_once(v001_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('older')")
    async with await Client.connect(v001_dsn, "older") as client:
        client.task(Work)(_never_runs)
        job = await client.insert(Work(), tags=["x"])
    assert await migrate(v001_dsn) == SHIPPED[1:]
    async with await Client.connect(v001_dsn, "older") as client:

        @client.task(Work)
        async def handle(j: Job[Work]) -> None:
            j.set_output({"after": "migration"})

        run = await work_one(client)
        assert run is not None
        assert run.row is not None
        assert run.row.id == job.id
        assert run.row.output == {"after": "migration"}
    async with connect_once(v001_dsn) as conn:
        constraint = await conn.fetchval(
            "SELECT convalidated FROM pg_constraint"
            " WHERE conname = 'receipt_completion_batches_outputs_aligned'"
            "   AND conrelid = 'older.receipt_completion_batches'::regclass"
        )
        assert constraint is False  # NOT VALID: old rows are not scanned


async def test_runtime_ahead_of_its_migration_drops_completion_outputs_and_keeps_failed_ones(
    v001_dsn: str,
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    async with connect_once(v001_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('ahead')")
    reader = InMemoryMetricReader()
    async with await Client.connect(v001_dsn, "ahead") as client:
        from storage.db.metrics import OutputMetrics

        client.metrics = OutputMetrics(meter_provider=MeterProvider(metric_readers=[reader]))

        @client.task(Work)
        async def handle(j: Job[Work]) -> None:
            j.set_output({"n": j.args.n})
            if j.args.n == 3:
                raise RuntimeError("fails with output")

        plain = await client.insert(Work(n=1))
        tagged = await client.insert(Work(n=2), tags=["general"])
        failing = await client.insert(Work(n=3))
        for _ in range(3):
            await work_one(client)
        for job in (plain, tagged):
            row = await client.get_job(job.id)
            assert row is not None
            assert row.state is JobState.COMPLETED
            assert row.output is None
        row = await client.get_job(failing.id)
        assert row is not None
        assert row.errors[-1]["output"] == {"n": 3}
        listed = await client.list_jobs(state=JobState.COMPLETED)
        assert {r.id for r in listed} == {plain.id, tagged.id}
    dropped = [
        (attrs["awa.job.kind"], attrs["awa.output.reason"], value)
        for attrs, value in counter_points(reader, "awa.job.output_dropped")
    ]
    assert dropped == [("work", "schema_missing", 2)]


async def _never_runs(job: Job[Work]) -> None:
    raise AssertionError("only inserted before the migration")


async def test_a_negative_probe_is_rechecked_after_thirty_seconds(v001_dsn: str) -> None:
    from storage.db.schema_probe import OutputColumnsProbe

    async with connect_once(v001_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('probed')")
        await conn.execute("SET search_path TO probed")
        now = [100.0]
        probe = OutputColumnsProbe(clock=lambda: now[0])
        assert await probe.present(conn) is False
        await migrate(v001_dsn)
        now[0] += 29
        assert await probe.present(conn) is False  # negative answer cached for 30 s
        now[0] += 1
        assert await probe.present(conn) is True
        await conn.execute("ALTER TABLE probed.done_entries RENAME COLUMN output TO gone")
        now[0] += 1000
        assert await probe.present(conn) is True  # a positive answer is cached for good


async def test_external_completion_on_a_v001_schema_drops_its_output_and_completes(
    v001_dsn: str,
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from storage import WaitForCallback
    from storage.db.metrics import OutputMetrics

    async with connect_once(v001_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('waits')")
    reader = InMemoryMetricReader()
    async with await Client.connect(v001_dsn, "waits") as client:
        client.metrics = OutputMetrics(meter_provider=MeterProvider(metric_readers=[reader]))

        @client.task(Work)
        async def handle(j: Job[Work]) -> WaitForCallback:
            return WaitForCallback(await j.register_callback(timeout_seconds=600))

        job = await client.insert(Work(n=1))
        await work_one(client)
        waiting = await client.get_job(job.id)
        assert waiting is not None
        assert waiting.callback is not None
        row = await client.complete_external(waiting.callback.callback_id, output={"n": 1})
        assert row.state is JobState.COMPLETED
        assert row.output is None
        stored = await client.get_job(job.id)
        assert stored is not None
        assert stored.state is JobState.COMPLETED
    dropped = [
        (attrs["awa.job.kind"], attrs["awa.output.reason"], value)
        for attrs, value in counter_points(reader, "awa.job.output_dropped")
    ]
    assert dropped == [("work", "schema_missing", 1)]


async def test_descriptor_sync_without_the_output_column_publishes_the_rest(
    v001_dsn: str,
) -> None:
    async with connect_once(v001_dsn) as conn:
        await conn.execute("SELECT awa.install_queue_storage('described')")
        assert not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attname = 'output'"
            " AND attrelid = 'awa.job_kind_descriptors'::regclass AND NOT attisdropped)"
        )
    async with await Client.connect(v001_dsn, "described") as client:

        @client.task(Work, output=Work)
        async def handle(j: Job[Work]) -> None:
            return None

        client.job_kind_descriptor("work", display_name="Work", owner="ops")
        await client.sync_descriptors()
        stored = await client.get_descriptor("work")
        assert stored is not None
        assert (stored.display_name, stored.owner, stored.output) == ("Work", "ops", None)
        client.job_kind_descriptor("work", display_name="Work v2", owner="ops")
        await client.sync_descriptors()
        again = await client.get_descriptor("work")
        assert again is not None
        assert again.display_name == "Work v2"
        assert (await client.list_kinds())[0].descriptor == again
