"""A compact flush holding two attempts of one job: the late completion of an attempt the
rescue ended, and the completion of the job's next attempt. The flush must tell them apart
by attempt (job id and run lease), not by job id: the late one is stale and writes nothing,
the next one is written with its own output (or found already written, on a retry)."""

from __future__ import annotations

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import CompactCompletion, Outcome
from storage.runtime.batcher import CompletionBatcher
from storage.runtime.claim import ClaimedJob, claim_batch


class Plain(BaseModel):
    n: int


async def _claim(client: Client, deadline: float) -> ClaimedJob:
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, ["default"], 1, deadline)
    return claimed


def _item(claimed: ClaimedJob, output: str) -> CompactCompletion:
    return CompactCompletion(
        claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, output, False
    )


async def _rescued_then_reclaimed(client: Client) -> tuple[ClaimedJob, ClaimedJob]:
    """A job (compact path: no tags, key or metadata) whose first attempt the rescue ended
    and whose second attempt is claimed: (rescued attempt, next attempt)."""

    @client.task(Plain)
    async def handle(job: Job[Plain]) -> None:
        return None

    job = await client.insert(Plain(n=1))
    old = await _claim(client, 0.0)
    assert (await client.run_maintenance()).rescued == 1
    await client.run_maintenance()  # promotes the immediate retry
    new = await _claim(client, 1800.0)
    assert (new.job_id, new.run_lease) == (job.id, old.run_lease + 1)
    assert new.claim_id != old.claim_id
    return old, new


@pytest.mark.parametrize("late_first", [True, False], ids=["late-first", "next-first"])
async def test_a_rescued_attempt_and_its_jobs_next_attempt_in_one_compact_flush(
    client: Client, conn: asyncpg.Connection, late_first: bool
) -> None:
    old, new = await _rescued_then_reclaimed(client)
    batcher = CompletionBatcher(client.pool, client.outputs_supported)
    submit = [(old, '{"from":"rescued"}'), (new, '{"from":"next"}')]
    futures = [batcher.submit(_item(c, text)) for c, text in submit[:: 1 if late_first else -1]]
    await batcher.drain()
    outcomes = [f.result() for f in futures]
    assert outcomes == ([Outcome.STALE, Outcome.WRITTEN][:: 1 if late_first else -1])
    batches = await conn.fetch(
        "SELECT claim_id, job_ids, run_leases FROM receipt_completion_batches"
    )
    assert [(b["claim_id"], b["job_ids"], b["run_leases"]) for b in batches] == [
        (new.claim_id, [new.job_id], [new.run_lease])
    ]
    row = await client.get_job(new.job_id)
    assert row is not None
    assert (row.state, row.run_lease, row.attempt) == (JobState.COMPLETED, new.run_lease, 2)
    assert row.storage_path == "compact"
    assert row.output == {"from": "next"}


async def test_a_retried_flush_finds_the_next_attempt_already_written_and_the_late_one_stale(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The same pair flushed again (a retry after a lost acknowledgement): the next attempt
    is found already written; the rescued attempt is still stale, not "already"."""
    old, new = await _rescued_then_reclaimed(client)
    items = [_item(old, '{"from":"rescued"}'), _item(new, '{"from":"next"}')]
    async with client.pool.acquire() as c:
        first = await complete_compact(c, items, outputs_supported=True)
        again = await complete_compact(c, items, outputs_supported=True)
    assert first == [Outcome.STALE, Outcome.WRITTEN]
    assert again == [Outcome.STALE, Outcome.ALREADY]
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 1
    row = await client.get_job(new.job_id)
    assert row is not None
    assert row.output == {"from": "next"}
