"""Faults: killed connections, a restarted server and a killed worker. Nothing is lost, nothing
completes twice, and no output comes from an attempt whose transition did not commit.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.db.migrator import install_schema, migrate
from storage.db.pool import connect_once
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import CompactCompletion, Outcome
from storage.ops.maintenance import MaintenanceSettings
from storage.runtime.batcher import CompletionBatcher
from storage.runtime.claim import claim_batch


class Work(BaseModel):
    n: int


def expected_output(n: int) -> str:
    return f'{{"n":{n},"twice":{2 * n}}}'


async def _claimed_item(client: Client, output: str) -> CompactCompletion:
    await client.insert(Work(n=1), kind="work")
    async with client.pool.acquire() as c:
        (job,) = await claim_batch(c, ["default"], 1, 600)
    return CompactCompletion(job.job_id, job.run_lease, job.claim_id, job.lane_seq, output, False)


@pytest.fixture
def work_kind(client: Client) -> None:
    @client.task(Work)
    async def work(job: Job[Work]) -> None:
        job.set_output({"n": job.args.n, "twice": 2 * job.args.n})


@pytest.mark.usefixtures("work_kind")
async def test_flush_connection_killed_before_commit_is_retried_and_publishes_once(
    client: Client, conn: asyncpg.Connection
) -> None:
    item = await _claimed_item(client, '{"sealed":true}')
    batcher = CompletionBatcher(client.pool, client.outputs_supported)
    async with conn.transaction():
        # Hold the attempt's lock so the flush blocks inside its transaction, then kill it.
        await conn.execute("SELECT pg_advisory_xact_lock($1)", item.claim_id)
        future = batcher.submit(item)
        # The flush waits in another backend; pg_locks is the only place that shows it. Each
        # query yields to the event loop, which lets the flush reach its lock wait.
        waiting = 0
        while not waiting:
            waiting = await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
        killed = await conn.fetchval(
            "SELECT pg_terminate_backend(pid) FROM pg_locks"
            " WHERE locktype = 'advisory' AND NOT granted"
        )
        assert killed
    assert await future is Outcome.WRITTEN  # the retry on a new connection committed it
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 1
    row = await client.get_job(item.job_id)
    assert row is not None
    assert row.output_text == '{"sealed":true}'


@pytest.mark.usefixtures("work_kind")
async def test_retry_after_a_lost_acknowledgement_finds_its_output_already_published(
    client: Client, conn: asyncpg.Connection
) -> None:
    item = await _claimed_item(client, '{"sealed":1}')
    async with client.pool.acquire() as c:
        assert await complete_compact(c, [item], outputs_supported=True) == [Outcome.WRITTEN]
    # The acknowledgement was lost: the batcher re-sends the same sealed value.
    batcher = CompletionBatcher(client.pool, client.outputs_supported)
    assert await batcher.submit(item) is Outcome.ALREADY
    assert await conn.fetchval("SELECT sum(completed_count) FROM receipt_completion_batches") == 1
    row = await client.get_job(item.job_id)
    assert row is not None
    assert row.output_text == '{"sealed":1}'


@pytest.fixture
def own_server() -> Iterator[tuple[str, object]]:
    """A private PostgreSQL this test may restart without disturbing the others."""
    from pgserver import postgres_server

    with tempfile.TemporaryDirectory(prefix="awa-fault-pg-") as data_dir:
        server = postgres_server.get_server(data_dir, cleanup_mode="stop")
        try:
            yield server.get_uri(), server
        finally:
            server.cleanup()


def _restart(server: object) -> None:
    from pgserver import postgres_server

    postgres_server.pg_ctl(  # type: ignore[attr-defined]
        ["-w", "-m", "immediate", "restart"],
        pgdata=server.pgdata,  # type: ignore[attr-defined]
        user=server.system_user,  # type: ignore[attr-defined]
        timeout=60,
    )


async def test_postgres_restarted_mid_run_loses_nothing_and_completes_once(
    own_server: tuple[str, object],
) -> None:
    dsn, server = own_server
    await migrate(dsn)
    async with connect_once(dsn) as c:
        await install_schema(c, "restart")
    total = 3000
    async with await Client.connect(dsn, "restart") as client:
        completed_seen = 0
        halfway = asyncio.Event()

        @client.task(Work)
        async def work(job: Job[Work]) -> None:
            nonlocal completed_seen
            job.set_output({"n": job.args.n, "twice": 2 * job.args.n})
            completed_seen += 1
            if completed_seen == total // 3:
                halfway.set()

        await client.insert_many([Work(n=i) for i in range(total)])
        await client.start(
            concurrency=64,
            heartbeat_interval=1.0,
            maintenance_interval=0.5,
            maintenance=MaintenanceSettings(heartbeat_stale_seconds=5),
        )
        await halfway.wait()
        await asyncio.to_thread(_restart, server)
        await client.run_until_idle()
        await client.shutdown()

    async with await Client.connect(dsn, "restart") as reader:
        counts = await reader.counts(cap=10_000)
        assert counts.by_state[JobState.COMPLETED] == total, counts
        async with reader.pool.acquire() as pooled:
            rows = await pooled.fetch("SELECT job_id, args, output FROM terminal_jobs")
            assert len(rows) == total  # none completed twice (one terminal row per job)
            assert len({r["job_id"] for r in rows}) == total
            for r in rows:
                assert r["output"] == expected_output(r["args"]["n"])


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from pydantic import BaseModel
    from storage import Client, Job

    class Work(BaseModel):
        n: int

    async def main(dsn, schema):
        client = await Client.connect(dsn, schema)

        @client.task(Work)
        async def work(job: Job[Work]) -> None:
            job.set_output({"from": "the killed worker"})
            print("RUNNING", flush=True)
            await asyncio.Event().wait()  # never returns: the test kills this process

        await client.start(maintenance_interval=None)
        await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_worker_killed_mid_handler_is_rescued_and_publishes_nothing(
    client: Client, conn: asyncpg.Connection, migrated_dsn: str, schema: str, tmp_path: Path
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    client.task(Work)(_never)  # make the kind known to this producer
    job = await client.insert(Work(n=7))
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        migrated_dsn,
        schema,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert child.stdout is not None
        assert (await child.stdout.readline()).strip() == b"RUNNING"
        child.send_signal(signal.SIGKILL)
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.RUNNING
    report = await client.run_maintenance(MaintenanceSettings(heartbeat_stale_seconds=0))
    assert report.rescued == 1
    await client.run_maintenance()  # promote the retry

    @client.task(Work)
    async def work(j: Job[Work]) -> None:
        j.set_output({"from": "the second attempt"})

    await client.run_until_idle(maintenance_interval=None)
    final = await client.get_job(job.id)
    assert final is not None
    assert final.state is JobState.COMPLETED
    assert final.attempt == 2
    assert final.output == {"from": "the second attempt"}
    assert [e["error"] for e in final.errors] == ["heartbeat stale: worker presumed dead"]
    assert all("output" not in e for e in final.errors)
    assert await conn.fetchval("SELECT count(*) FROM terminal_jobs WHERE job_id = $1", job.id) == 1


async def _never(job: Job[Work]) -> None:
    raise AssertionError("the producer never runs jobs")
