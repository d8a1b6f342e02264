"""The runtime registry (migration v010): a runtime registers once per start, before its first
claim; every claim batch it writes records its id, so the timeline names the runtime of each
attempt on both finalize paths; a client that is not a runtime registers nothing; maintenance
prunes the old rows no claim batch references, at most once per claim rotation interval; a
schema before v010 keeps working without an id; and a re-run of the migration's tail takes no
lock."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import asyncpg

from storage import Client, Job, MaintenanceSettings, RuntimeInfo
from storage.db.migrator import install_schema, migrate
from storage.db.pool import connect_once
from storage.ops.runtimes import VERSION
from storage.testing import work_one
from tests.storage.migration_db import database_at, locks_on_schema

Args = dict[str, Any]
REGISTERED = "SELECT id, host, pid, name, version FROM runtimes ORDER BY id"


def _tasks(client: Client) -> None:
    @client.task(kind="fine")
    async def fine(job: Job[Args]) -> dict[str, int]:
        return {"n": 1}

    @client.task(kind="broken")
    async def broken(job: Job[Args]) -> None:
        raise RuntimeError("broken on purpose")


async def test_a_start_registers_once_and_its_claims_carry_the_id_on_both_paths(
    client: Client, conn: asyncpg.Connection
) -> None:
    _tasks(client)
    done = await client.insert({}, kind="fine")  # compact path
    failed = await client.insert({}, kind="broken", max_attempts=1)  # general path
    await client.run_until_idle(name="shop.tasks:tasks", maintenance_interval=None)
    (row,) = await conn.fetch(REGISTERED)
    assert (row["host"], row["pid"]) == (socket.gethostname(), os.getpid())
    assert (row["name"], row["version"]) == ("shop.tasks:tasks", VERSION)
    assert await conn.fetchval("SELECT count(*) FROM claim_batches WHERE runtime_id IS NULL") == 0
    for job_id, path, outcome in ((done.id, "compact", "completed"), (failed.id, None, "error")):
        (span,) = await client.attempt_timeline(job_id)
        assert span.outcome == outcome
        assert span.runtime is not None
        assert (span.runtime.id, span.runtime.host, span.runtime.pid) == (
            row["id"],
            socket.gethostname(),
            os.getpid(),
        )
        assert span.runtime.started_at is not None
        job = await client.get_job(job_id)
        assert job is not None
        assert path is None or job.storage_path == path
    # The SQL of docs/runtime.md, on this test's schema.
    claimed = await conn.fetch(
        "SELECT cb.claimed_at, cb.runtime_id, rt.host, rt.pid FROM claim_batches cb"
        " LEFT JOIN runtimes rt ON rt.id = cb.runtime_id WHERE cb.job_ids @> ARRAY[$1::bigint]"
        " ORDER BY cb.claim_id",
        done.id,
    )
    assert [(r["runtime_id"], r["pid"]) for r in claimed] == [(row["id"], os.getpid())]
    # A second start is a second runtime: its own row, its own id.
    again = await client.insert({}, kind="fine")
    await client.run_until_idle(maintenance_interval=None)
    (span,) = await client.attempt_timeline(again.id)
    ids = [r["id"] for r in await conn.fetch(REGISTERED)]
    assert len(ids) == 2
    assert span.runtime is not None
    assert span.runtime.id == ids[1]


async def test_a_client_that_is_not_a_runtime_registers_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    _tasks(client)
    job = await client.insert({}, kind="fine")
    await client.get_job(job.id)
    await client.browse()
    await client.run_maintenance()
    await work_one(client)  # a claim outside a runtime: no id
    assert await conn.fetchval("SELECT count(*) FROM runtimes") == 0
    (span,) = await client.attempt_timeline(job.id)
    assert span.outcome == "completed"
    assert span.runtime is None


async def test_the_timeline_of_one_read_holds_the_job_and_its_runtime(
    client: Client, conn: asyncpg.Connection
) -> None:
    _tasks(client)
    job = await client.insert({}, kind="broken", max_attempts=1)
    await client.run_until_idle(name="reader", maintenance_interval=None)
    read = await client.job_timeline(job.id)
    assert read.row is not None
    assert "broken on purpose" in read.row.errors[0]["error"]
    (span,) = read.spans
    assert span.runtime is not None
    assert span.runtime.name == "reader"
    unknown = await client.job_timeline(10**12)
    assert (unknown.row, unknown.spans) == (None, [])


async def test_maintenance_prunes_old_unreferenced_rows_once_per_interval(
    client: Client, conn: asyncpg.Connection
) -> None:
    _tasks(client)
    job = await client.insert({}, kind="fine")
    await client.run_until_idle(maintenance_interval=None)  # registers: referenced
    await conn.execute(
        "INSERT INTO runtimes (host, pid, started_at) VALUES "
        "('old-and-gone', 1, now() - interval '8 days'), ('young', 2, now() - interval '1 hour')"
    )
    await conn.execute(
        "UPDATE runtimes SET started_at = now() - interval '30 days' WHERE pid = $1", os.getpid()
    )
    report = await client.run_maintenance()
    assert report.runtimes_pruned == 1
    hosts = {r["host"] for r in await conn.fetch(REGISTERED)}
    assert hosts == {socket.gethostname(), "young"}  # referenced, and inside the retention
    # Not due again until a claim rotation interval has passed: a new old row waits.
    await conn.execute(
        "INSERT INTO runtimes (host, pid, started_at) "
        "VALUES ('later', 3, now() - interval '8 days')"
    )
    assert (await client.run_maintenance()).runtimes_pruned == 0
    await conn.execute(
        "UPDATE maintenance_state SET runtimes_pruned_at = now() - interval '6 minutes'"
    )
    assert (await client.run_maintenance()).runtimes_pruned == 1
    # A runtime whose row was pruned reads by its id alone.
    await conn.execute("DELETE FROM runtimes WHERE pid = $1", os.getpid())
    (span,) = await client.attempt_timeline(job.id)
    assert span.runtime is not None
    assert span.runtime == RuntimeInfo(id=span.runtime.id)
    # A retention of its own: shorter, and the young row goes too (once due).
    await conn.execute("UPDATE maintenance_state SET runtimes_pruned_at = NULL")
    settings = MaintenanceSettings(runtime_retention=timedelta(minutes=30))
    assert (await client.run_maintenance(settings)).runtimes_pruned == 1
    assert await conn.fetchval("SELECT count(*) FROM runtimes") == 0


async def test_a_schema_before_v010_runs_without_an_id_until_migrated(pg_dsn: str) -> None:
    async with database_at(pg_dsn, "awa_v009", 9) as dsn:
        async with connect_once(dsn) as conn:
            await install_schema(conn, "before_v010")
        async with await Client.connect(dsn, "before_v010") as client:
            _tasks(client)
            job = await client.insert({}, kind="fine")
            await client.run_until_idle(name="old")  # maintenance runs too: nothing to prune
            (span,) = await client.attempt_timeline(job.id)
            assert (span.outcome, span.runtime) == ("completed", None)
            assert (await client.run_maintenance()).runtimes_pruned == 0
            await migrate(dsn)
        async with await Client.connect(dsn, "before_v010") as client:
            _tasks(client)
            later = await client.insert({}, kind="fine")
            await client.run_until_idle(name="new", maintenance_interval=None)
            (old,) = await client.attempt_timeline(job.id)
            (new,) = await client.attempt_timeline(later.id)
            assert old.runtime is None  # claimed before the migration
            assert new.runtime is not None
            assert new.runtime.name == "new"


async def test_the_migration_tail_reruns_without_a_lock(
    conn: asyncpg.Connection, schema: str
) -> None:
    async with conn.transaction():
        await conn.execute("SELECT awa.add_runtimes_v010($1)", schema)
        locked = await locks_on_schema(conn, schema)
    assert locked == 0
