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
from storage.finalize.types import AttemptRef, CompactCompletion, GeneralCompletion, Outcome
from storage.runtime import batcher, claim


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
