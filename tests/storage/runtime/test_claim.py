"""The claim: its plans, its failure, and its agreement with cancel, promotion and enqueue.

The claim's two statements run generic plans, and it commits without waiting for the WAL flush,
both set for the claim's transaction only (the server planned LOCK_LANE afresh on every claim
before).

Cancel and claim agree: every change of a job's state is decided against the row as it is
under the lock that serialises it, never against a snapshot taken before the lock wait.

The deterministic tests hold one side's transaction open after it took the lane lock, start the
other side, wait until PostgreSQL shows it blocked on that lock, then commit the first.
"""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, InvalidJobState, Job, JobState
from storage.db import session_functions
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import CompactCompletion, Outcome
from storage.insert.enqueue import NewJob, insert_jobs, promote_due
from storage.ops import runtimes
from storage.ops.admin import cancel
from storage.ops.audit import Recorder
from storage.runtime.claim import CLAIM_FUNCTIONS, CLAIM_WITH_RUNTIME, LOCK_LANE, claim_batch
from storage.values.audit import Audit
from tests.storage.roles import no_temp_dsn

Args = dict[str, Any]

LOCK_WAIT = """
SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'
"""
TERMINAL_ROWS = "SELECT state, output FROM terminal_jobs WHERE job_id = $1"
MADE_FUNCTIONS = "SELECT count(*) FROM pg_proc WHERE pronamespace = pg_my_temp_schema()"

OPERATOR = Recorder(Audit.of("test"))  # who the direct calls of cancel are audited as


def _register(client: Client) -> None:
    @client.task(kind="race_job")
    async def handler(job: Job[Args]) -> None:
        job.set_output({"ran": job.args["n"]})


async def _insert(client: Client, count: int) -> list[int]:
    rows = await client.insert_many([{"n": n} for n in range(count)], kind="race_job")
    return [r.id for r in rows]


async def _terminal(conn: asyncpg.Connection, job_id: int) -> list[tuple[str, Any]]:
    return [(r["state"], r["output"]) for r in await conn.fetch(TERMINAL_ROWS, job_id)]


async def test_claim_waiting_behind_a_cancel_does_not_take_the_cancelled_job(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    (job_id,) = await _insert(client, 1)
    async with client.pool.acquire() as holder, client.pool.acquire() as claimer:
        tx = holder.transaction()
        await tx.start()
        # The lane locked, the ready row tombstoned:
        await cancel(holder, job_id, outputs=True, audit=OPERATOR)
        started = asyncio.ensure_future(claim_batch(claimer, ["default"], 256, 1800))
        await _wait_for_lock(conn, claimer.get_server_pid(), started)
        await tx.commit()
        claimed = await started
    assert [c.job_id for c in claimed] == []
    assert await _terminal(conn, job_id) == [("cancelled", None)]
    assert (await client.get_job(job_id)).state is JobState.CANCELLED  # type: ignore[union-attr]


async def test_second_cancel_waiting_behind_the_first_is_refused(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    (job_id,) = await _insert(client, 1)
    async with client.pool.acquire() as holder, client.pool.acquire() as other:
        tx = holder.transaction()
        await tx.start()
        await cancel(holder, job_id, outputs=True, audit=OPERATOR)
        second = asyncio.ensure_future(cancel(other, job_id, outputs=True, audit=OPERATOR))
        await _wait_for_lock(conn, other.get_server_pid(), second)
        await tx.commit()
        with pytest.raises(InvalidJobState, match="cancelled"):
            await second
    assert await _terminal(conn, job_id) == [("cancelled", None)]


async def test_cancel_waiting_behind_a_claim_cancels_the_running_attempt(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    (job_id,) = await _insert(client, 1)
    async with client.pool.acquire() as holder, client.pool.acquire() as other:
        tx = holder.transaction()
        await tx.start()
        (claimed,) = await claim_batch(holder, ["default"], 256, 1800)
        cancelling = asyncio.ensure_future(cancel(other, job_id, outputs=True, audit=OPERATOR))
        await _wait_for_lock(conn, other.get_server_pid(), cancelling)
        await tx.commit()
        await cancelling  # went through the running-attempt path: the claim won
    # The handler's completion, arriving after the cancel, is stale.
    done = CompactCompletion(
        job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, '{"ran": 0}', False
    )
    async with client.pool.acquire() as c:
        outcomes = await complete_compact(c, [done], outputs_supported=True)
    assert outcomes == [Outcome.STALE]
    assert await _terminal(conn, job_id) == [("cancelled", None)]


async def test_cancel_waiting_behind_a_promotion_cancels_the_promoted_job(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    row = await client.insert(
        {"n": 1}, kind="race_job", run_at=datetime.now(UTC) + timedelta(hours=1)
    )
    await conn.execute("UPDATE deferred_jobs SET run_at = now() - interval '1 second'")
    async with client.pool.acquire() as holder, client.pool.acquire() as other:
        tx = holder.transaction()
        await tx.start()
        assert await promote_due(holder) == 1
        cancelling = asyncio.ensure_future(cancel(other, row.id, outputs=True, audit=OPERATOR))
        await _wait_for_lock(conn, other.get_server_pid(), cancelling)
        await tx.commit()
        await cancelling  # decided again as an available job, not refused as one
    async with client.pool.acquire() as c:
        assert await claim_batch(c, ["default"], 256, 1800) == []
    assert await _terminal(conn, row.id) == [("cancelled", None)]


async def test_claim_waiting_behind_an_enqueue_does_not_pass_its_rows(
    client: Client, conn: asyncpg.Connection
) -> None:
    """A claim that waited for the lane sees the rows the previous holder added: the cursor
    never moves past a job nobody claimed (here the holder claims the lane empty, then
    enqueues one more job, as a claim followed by an enqueue would)."""
    _register(client)
    await _insert(client, 3)
    late = NewJob("race_job", "default", b'{"n": 9}', 2, 25, None, None)
    async with client.pool.acquire() as holder, client.pool.acquire() as claimer:
        tx = holder.transaction()
        await tx.start()
        first = await claim_batch(holder, ["default"], 256, 1800)
        (added,) = await insert_jobs(holder, [late], now=datetime.now(UTC))
        waiting = asyncio.ensure_future(claim_batch(claimer, ["default"], 256, 1800))
        await _wait_for_lock(conn, claimer.get_server_pid(), waiting)
        await tx.commit()
        second = await waiting
    assert len(first) == 3
    assert [c.job_id for c in second] == [added.job_id]


async def _wait_for_lock(watch: asyncpg.Connection, pid: int, task: asyncio.Future[Any]) -> None:
    """Return once backend ``pid`` waits for a lock (polled, no sleep); ``task`` runs on it."""
    for _ in range(20000):
        if await watch.fetchval(LOCK_WAIT, pid):
            return
        assert not task.done(), "it finished without waiting for the lane lock"
    task.cancel()
    raise AssertionError("it never waited for the lane lock")


JOBS = 1500


async def test_cancels_racing_a_running_runtime_leave_one_terminal_row_per_job(
    client: Client, migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    _register(client)
    ids = await _insert(client, JOBS)
    order = random.Random(12).sample(ids, len(ids))
    async with await Client.connect(migrated_dsn, schema) as admin_client:

        async def cancel_some(share: list[int]) -> int:
            done = 0
            for job_id in share:
                try:
                    await admin_client.cancel_job(job_id)
                    done += 1
                except InvalidJobState:
                    pass  # it completed first: the race this test is about
            return done

        await client.start(["default"], concurrency=32, claim_size=16, maintenance_interval=None)
        try:
            cancelled = sum(await asyncio.gather(*(cancel_some(order[i::4]) for i in range(4))))
            await client.run_until_idle(["default"])
        finally:
            await client.shutdown()
    rows = await conn.fetch(
        "SELECT job_id AS id, count(*) AS n, min(state) AS state,"
        "       bool_or(output IS NOT NULL) AS has_out"
        "  FROM terminal_jobs WHERE job_id = ANY($1::bigint[]) GROUP BY job_id",
        ids,
    )
    assert len(rows) == JOBS, "every job ended"
    assert [r["id"] for r in rows if r["n"] != 1] == []
    cancelled_rows = [r for r in rows if r["state"] == "cancelled"]
    assert len(cancelled_rows) == cancelled
    assert [r["id"] for r in cancelled_rows if r["has_out"]] == []
    # Both sides won some of the races, or the test proved nothing.
    assert 0 < cancelled < JOBS


CLAIMS = 8  # more than the five custom plans plan_cache_mode=auto tries before a generic one


class Item(BaseModel):
    n: int


@pytest.fixture
def item_handler(client: Client) -> None:
    client.task(Item)(_ignore)


async def _ignore(job: Job[Item]) -> None:
    del job


async def test_a_claim_is_one_statement_and_its_settings_end_with_it(
    client: Client, item_handler: None
) -> None:
    """Once the session has made its claim function, a claim sends one statement (no BEGIN,
    no COMMIT), and its asynchronous commit and generic plans are its own: a later write on
    the connection commits synchronously unless it asks otherwise, so a durable write after
    a lost claim cannot be (``claim.CLAIM_FUNCTION``)."""
    await client.insert_many([Item(n=i) for i in range(2 * CLAIMS)])
    sent: list[str] = []
    async with client.pool.acquire() as c:
        runtime_id = await runtimes.register(c, "one statement")  # as a runtime claims
        claimed = await claim_batch(c, ["default"], 2, 60, runtime_id=runtime_id)

        def log(record: Any) -> None:
            sent.append(record.query)

        c.add_query_logger(log)
        for _ in range(CLAIMS - 1):
            claimed += await claim_batch(c, ["default"], 2, 60, runtime_id=runtime_id)
        assert await c.fetchval("SHOW plan_cache_mode") == "auto"
        assert await c.fetchval("SHOW synchronous_commit") == "on"
        assert not c.is_in_transaction()
        c.remove_query_logger(log)  # before the pool's reset on release
    # Loggers are called soon after each statement: the SHOWs let the claims' calls arrive.
    call = CLAIM_FUNCTIONS[True][2]
    assert sent[: CLAIMS - 1] == [call] * (CLAIMS - 1)
    assert set(sent[CLAIMS - 1 :]) <= {"SHOW plan_cache_mode", "SHOW synchronous_commit"}
    assert [job.args for job in claimed] == [{"n": i} for i in range(2 * CLAIMS)]


async def test_a_session_without_temp_claims_with_statements_on_generic_plans(
    migrated_dsn: str,
    schema: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A role that may not make temporary objects claims with LOCK_LANE and the claim as
    statements of one transaction, on generic plans set for that transaction only (the
    server planned LOCK_LANE afresh on every claim before)."""
    monkeypatch.setattr(session_functions, "_refusal_told", False)  # as in a fresh process
    async with no_temp_dsn(migrated_dsn, schema) as dsn, await Client.connect(dsn, schema) as c:
        c.task(Item)(_ignore)
        await c.insert_many([Item(n=i) for i in range(2 * CLAIMS)])
        async with c.pool.acquire() as conn:
            runtime_id = await runtimes.register(conn, "statements")
            with caplog.at_level(logging.INFO, logger="storage"):
                claimed = [
                    job
                    for _ in range(CLAIMS)
                    for job in await claim_batch(conn, ["default"], 2, 60, runtime_id=runtime_id)
                ]
            assert await conn.fetchval("SHOW plan_cache_mode") == "auto"
            assert await conn.fetchval("SHOW synchronous_commit") == "on"
            assert not await conn.fetchval(MADE_FUNCTIONS)
            plans = {
                row["statement"]: (row["generic_plans"], row["custom_plans"])
                for row in await conn.fetch(
                    "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                )
            }
    assert plans[LOCK_LANE] == (CLAIMS, 0)
    assert plans[CLAIM_WITH_RUNTIME] == (CLAIMS, 0)
    assert [job.args for job in claimed] == [{"n": i} for i in range(2 * CLAIMS)]
    told = [r.getMessage() for r in caplog.records if "temporary functions" in r.getMessage()]
    assert told == [
        "this session may not make temporary functions (InsufficientPrivilegeError): claims"
        " and completion flushes run as separate statements, a round trip each"
    ]


async def test_a_claim_that_fails_rolls_back_and_leaves_the_connection_usable(
    client: Client, item_handler: None
) -> None:
    await client.insert_many([Item(n=1)])
    async with client.pool.acquire() as c:
        with pytest.raises(asyncpg.DatetimeFieldOverflowError):  # the batch's deadline_at
            await claim_batch(c, ["default"], 1, float("inf"))
        assert not c.is_in_transaction()
        assert await c.fetchval("SHOW plan_cache_mode") == "auto"
        assert await c.fetchval("SHOW synchronous_commit") == "on"
        (job,) = await claim_batch(c, ["default"], 1, 60)  # nothing was claimed
    assert job.args == {"n": 1}
