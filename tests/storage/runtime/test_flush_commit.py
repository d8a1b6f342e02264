"""The handler completion flush commits asynchronously, and nothing else it shares a connection
with does: the setting is the flush's transaction's own (``batcher.BEGIN_FLUSH``), and an
external completion, whose caller is told "done", commits synchronously
(``test_round_trips`` sees what the runtime's flushes and an external completion send).

What the flush ran under is seen from inside: a write passed to ``flush_on`` reads the
setting in the flush's transaction.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.db.pool import Conn
from storage.finalize import compact_writes
from storage.finalize.types import AttemptRef, CompactCompletion, GeneralCompletion, Outcome
from storage.runtime import batcher, claim
from tests.storage.roles import no_temp_dsn

MADE_FUNCTIONS = "SELECT count(*) FROM pg_proc WHERE pronamespace = pg_my_temp_schema()"


class Item(BaseModel):
    n: int


async def _claimed(client: Client, n: int, **insert: Any) -> list[claim.ClaimedJob]:
    @client.task(Item)
    async def item(job: Job[Item]) -> None:
        del job

    await client.insert_many([Item(n=i) for i in range(n)], **insert)
    async with client.pool.acquire() as c:
        return await claim.claim_batch(c, ["default"], n, 1800.0)


async def test_a_flush_commits_asynchronously_inside_its_transaction_only(
    client: Client, conn: asyncpg.Connection
) -> None:
    compact, general = await _claimed(client, 2)
    seen: list[str | None] = []

    async def write(c: Conn, items: list[CompactCompletion], supported: bool) -> list[Outcome]:
        seen.append(await c.fetchval("SHOW synchronous_commit"))
        return await batcher.write_compact(c, items, supported)

    item = CompactCompletion(
        compact.job_id, compact.run_lease, compact.claim_id, compact.lane_seq, '{"a":1}', False
    )
    assert await batcher.flush_on(conn, write, [item], True) == [Outcome.WRITTEN]
    assert seen == ["off"]
    # The same connection, not reset by a pool: the setting ended with the flush's commit.
    assert not conn.is_in_transaction()
    assert await conn.fetchval("SHOW synchronous_commit") == "on"

    ref = AttemptRef(general.job_id, general.run_lease, general.claim_id)
    one = GeneralCompletion(ref, general.attempt, '{"b":2}', False)
    assert await batcher.flush_on(conn, batcher.write_general, [one], True) == [Outcome.WRITTEN]
    assert await conn.fetchval("SHOW synchronous_commit") == "on"
    for claimed, output in ((compact, '{"a":1}'), (general, '{"b":2}')):
        row = await client.get_job(claimed.job_id)
        assert row is not None
        assert (row.state, row.output_text) == (JobState.COMPLETED, output)


async def test_a_flush_that_fails_leaves_the_connection_synchronous(
    client: Client, conn: asyncpg.Connection
) -> None:
    (claimed,) = await _claimed(client, 1)

    async def write(c: Conn, items: list[CompactCompletion], supported: bool) -> list[Outcome]:
        await c.execute("SELECT 1 / 0")
        return []

    item = CompactCompletion(
        claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, None, False
    )
    with pytest.raises(asyncpg.DivisionByZeroError):
        await batcher.flush_on(conn, write, [item], True)
    assert not conn.is_in_transaction()
    assert await conn.fetchval("SHOW synchronous_commit") == "on"


async def test_a_compact_flush_is_one_call_whose_setting_ends_with_it(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The batcher's compact flush is one call of the session's flush function (made on the
    connection's first flush), committed asynchronously inside it only."""
    first, second = await _claimed(client, 2)
    sent: list[str] = []

    def log(record: Any) -> None:
        sent.append(record.query)

    flushes = []
    for claimed in (first, second):
        item = CompactCompletion(
            claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, '{"a":1}', False
        )
        if claimed is second:
            conn.add_query_logger(log)
        flushes.append(
            await batcher.flush_on(
                conn, batcher.write_compact, [item], True, batcher.compact_in_one_call
            )
        )
    assert not conn.is_in_transaction()
    assert await conn.fetchval("SHOW synchronous_commit") == "on"
    conn.remove_query_logger(log)
    assert flushes == [[Outcome.WRITTEN], [Outcome.WRITTEN]]
    # Loggers are called soon after each statement: the SHOW lets the flush's call arrive.
    assert sent[:1] == [compact_writes.FLUSH_FUNCTIONS[True][2]]
    assert set(sent[1:]) <= {"SHOW synchronous_commit"}
    for claimed in (first, second):
        row = await client.get_job(claimed.job_id)
        assert row is not None
        assert (row.state, row.output_text) == (JobState.COMPLETED, '{"a":1}')


async def test_a_runtime_whose_role_may_not_make_functions_runs_on_statements(
    migrated_dsn: str, schema: str
) -> None:
    """Without the TEMP privilege the claims and flushes run as statements, and every job
    still completes with its output."""
    async with no_temp_dsn(migrated_dsn, schema) as dsn, await Client.connect(dsn, schema) as c:

        @c.task(Item)
        async def item(job: Job[Item]) -> None:
            job.set_output({"n": job.args.n})

        await c.insert_many([Item(n=i) for i in range(50)])
        await c.run_until_idle(maintenance_interval=None)
        counts = await c.counts()
        async with c.pool.acquire() as own:
            made = await own.fetchval(MADE_FUNCTIONS)
        jobs = [await c.get_job(row.id) for row in await c.list_jobs(limit=100)]
    assert counts.by_state[JobState.COMPLETED] == 50
    assert made == 0
    assert sorted(job.output["n"] for job in jobs if job is not None) == list(range(50))
