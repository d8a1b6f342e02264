"""Connections lost where a write or a notice was in flight.

A cancel notice sent while the runtime's LISTEN connection is down is lost with it; the
runtime looks the cancels up once it listens again, so the handler is still told. A handler's
finalize (fail, retry, general-path completion) that hits a killed connection is retried, and
the ``(job_id, run_lease)`` guard keeps the retry from writing twice.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg
import orjson
from pydantic import BaseModel

from storage import Client, Job, JobState, TerminalError
from storage.db.pool import connect_once


class Work(BaseModel):
    n: int


async def _until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """A bounded poll of a real condition."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not predicate():
        assert loop.time() < end, what
        await asyncio.sleep(0.02)


@asynccontextmanager
async def _limited_role(dsn: str) -> AsyncIterator[tuple[str, str]]:
    """(DSN, role) of a fresh login role with the test role's privileges (by membership) and
    a connection limit the test can lower: the server then refuses the role new connections
    while the ones it has stay up."""
    role = f"awa_limited_{os.getpid()}_{secrets.token_hex(3)}"
    password = secrets.token_hex(8)
    async with connect_once(dsn) as admin:
        # Identifiers cannot be parameters; role is built from digits and hex above.
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        await admin.execute(f'GRANT "{await admin.fetchval("SELECT current_user")}" TO {role}')
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(role)}:{quote(password)}@{host}"
    try:
        yield urlunsplit(parts._replace(netloc=netloc)), role
    finally:
        async with connect_once(dsn) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
            )
            await admin.execute(f"DROP ROLE {role}")


async def test_a_cancel_sent_while_the_listener_is_down_still_reaches_the_handler(
    client: Client, conn: asyncpg.Connection, migrated_dsn: str, schema: str
) -> None:
    started = asyncio.Event()
    told = asyncio.Event()

    async def wait_for_cancel(job: Job[Work]) -> None:
        started.set()
        await job.wait_cancelled()  # what is_cancelled() reads
        told.set()
        job.set_output({"ran": "on"})  # completing now is stale: the job stays cancelled

    client.task(Work)(wait_for_cancel)  # the operator's client knows the kind too
    job = await client.insert(Work(n=1))
    async with (
        _limited_role(migrated_dsn) as (dsn, role),
        await Client.connect(dsn, schema) as worker,
    ):
        worker.task(Work)(wait_for_cancel)
        # One slot: once the job runs, nothing but the listener uses the pool. Heartbeats
        # are an hour apart, so only the listener's own re-check can tell the handler.
        await worker.start(concurrency=1, heartbeat_interval=3600, maintenance_interval=None)
        try:
            await asyncio.wait_for(started.wait(), 30)  # a hang guard
            listener = worker.notices.pid
            assert listener is not None
            await conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT 0")
            # Every backend of the worker goes (the listener's and an idle one it could
            # take over), and no new one may connect.
            killed = await conn.fetchval(
                "SELECT array_agg(pid) FILTER (WHERE pg_terminate_backend(pid, 10000))"
                " FROM pg_stat_activity WHERE usename = $1",
                role,
            )
            assert listener in killed
            await _until(lambda: not worker.notices.active, 20, "the loss went unnoticed")
            # Down: the backends are gone (terminate waited for them), none is left.
            none = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE usename = $1)"
            assert await conn.fetchval(none, role)
            await client.cancel_job(job.id)  # its notice reaches nobody
            assert not worker.notices.active
            assert worker.notices.pid is None
            assert not told.is_set()
            await conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
            await asyncio.wait_for(told.wait(), 30)  # a hang guard
            await asyncio.wait_for(worker.run_until_idle(), 30)
        finally:
            await conn.execute(f"ALTER ROLE {role} CONNECTION LIMIT -1")
            await worker.shutdown(abandon=True)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.CANCELLED
    assert row.output is None
    rows = "SELECT count(*) FROM terminal_jobs WHERE job_id = $1"
    assert await conn.fetchval(rows, job.id) == 1


def _with_application_name(dsn: str, name: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


TOTAL = 300
KILLS = 8


async def test_handler_finalizes_on_killed_connections_are_retried_and_land_once(
    conn: asyncpg.Connection, migrated_dsn: str, schema: str
) -> None:
    """Tagged jobs take the general path; odd ones fail for good with an output. Every
    backend of the worker is killed again and again while they finalize, with no maintenance
    to rescue a stranded attempt: every job whose handler ran must end once, in its own state.
    (A claim whose commit landed but whose reply was lost strands jobs no handler ever saw;
    those wait for heartbeat rescue, which is off here, and are left out.)"""
    app_name = f"awa-finalize-{schema}"
    started: set[int] = set()
    reached = asyncio.Event()
    target = 0

    async with await Client.connect(
        _with_application_name(migrated_dsn, app_name), schema
    ) as client:

        @client.task(Work)
        async def work(job: Job[Work]) -> None:
            started.add(job.id)
            if len(started) >= target:
                reached.set()
            job.set_output({"n": job.args.n})
            if job.args.n % 2:
                raise TerminalError("odd")

        await client.insert_many(
            [Work(n=i) for i in range(TOTAL)], tags=["general"], max_attempts=1
        )
        killed = 0
        await client.start(concurrency=16, claim_size=4, maintenance_interval=None)
        try:
            for i in range(1, KILLS + 1):
                target = i * TOTAL // (KILLS + 2)
                reached.clear()
                if len(started) < target:
                    await asyncio.wait_for(reached.wait(), 60)  # a hang guard
                killed += await conn.fetchval(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))"
                    " FROM pg_stat_activity WHERE application_name = $1",
                    app_name,
                )
            drained = "SELECT NOT EXISTS (SELECT 1 FROM queue_lanes WHERE claim_seq < next_seq)"
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 45
            while not await conn.fetchval(drained):  # a bounded poll of the real state
                assert loop.time() < deadline, "the runtime stopped claiming"
                await asyncio.sleep(0.05)
        finally:
            # Graceful: waits for every running handler and its finalize (with its retries).
            await asyncio.wait_for(client.shutdown(), 45)
    assert killed >= KILLS
    rows = await conn.fetch(
        "SELECT job_id, count(*) AS n, min(state::text) AS state, min(output::text) AS output,"
        " min(payload::text) AS payload, min((args->>'n')::int) AS arg"
        " FROM terminal_jobs GROUP BY job_id"
    )
    ended = {row["job_id"] for row in rows}
    assert started <= ended, f"{len(started - ended)} finalizes were lost"
    assert len(ended) >= TOTAL - KILLS * 4  # only lost claims (at most one batch a kill) wait
    for row in rows:
        assert row["n"] == 1, f"job {row['job_id']} ended {row['n']} times"
        n = row["arg"]
        if n % 2:
            assert row["state"] == "failed"
            assert row["output"] is None
            (entry,) = orjson.loads(row["payload"])["errors"]
            assert entry["output"] == {"n": n}
        else:
            assert row["state"] == "completed"
            assert orjson.loads(row["output"]) == {"n": n}
