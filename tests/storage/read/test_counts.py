"""The tab counts are exact up to a cap and say "at least the cap" above it; a deleted compact
completion whose batch was pruned is no longer subtracted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from storage import Client, Job, JobState
from storage.db.pool import connect_once
from storage.ops.maintenance import MaintenanceSettings
from storage.ops.rings import RotateOutcome, rotate
from storage.read.counting import counts
from storage.testing import work_one

Args = dict[str, int]
LATER = datetime(2999, 1, 1, tzinfo=UTC)


async def _noop(job: Job[Args]) -> None:
    return None


async def test_counts_are_exact_up_to_the_cap_and_a_lower_bound_above_it(client: Client) -> None:
    client.task(kind="c_noop", queue="c")(_noop)
    for n in range(3):
        await client.insert({"n": n}, kind="c_noop", run_at=LATER)
    for n in range(4):
        await client.insert({"n": n}, kind="c_noop")

    at_cap = await client.counts(cap=3)
    assert at_cap.by_state[JobState.SCHEDULED] == 3
    assert at_cap.is_exact(JobState.SCHEDULED)
    assert at_cap.by_state[JobState.AVAILABLE] == 3  # 4 available, more than the cap
    assert not at_cap.is_exact(JobState.AVAILABLE)
    assert at_cap.capped == frozenset({JobState.AVAILABLE})
    assert not at_cap.live_exact
    assert at_cap.live == 6  # a lower bound: 3 scheduled + at least 3 available

    roomy = await client.counts(cap=4)
    assert roomy.by_state[JobState.AVAILABLE] == 4
    assert roomy.capped == frozenset()
    assert roomy.live_exact
    assert roomy.live == 7


async def test_completed_is_capped_across_general_rows_and_compact_batches(
    client: Client,
) -> None:
    client.task(kind="c_done", queue="c")(_noop)
    for n in range(3):
        await client.insert({"n": n}, kind="c_done")  # compact: no tags
    await client.insert({"n": 9}, kind="c_done", tags=["general"])
    while await work_one(client, ["c"]) is not None:
        pass

    exact = await client.counts(cap=10)
    assert exact.by_state[JobState.COMPLETED] == 4
    assert exact.is_exact(JobState.COMPLETED)

    capped = await client.counts(cap=2)
    assert capped.by_state[JobState.COMPLETED] == 2
    assert not capped.is_exact(JobState.COMPLETED)

    async with client.pool.acquire() as conn:
        batches = await conn.fetchval("SELECT count(*) FROM receipt_completion_batches")
        assert batches == 3  # one completion per work_one call
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            every_batch = await counts(conn, cap=10, batches=3)
            fewer = await counts(conn, cap=10, batches=1)
    assert every_batch.by_state[JobState.COMPLETED] == 4
    assert every_batch.is_exact(JobState.COMPLETED)
    # batches=1 reads 2 batch rows (one more, to learn there are more): 1 general + 2 compact,
    # "at least 3", though 4 are completed
    assert fewer.by_state[JobState.COMPLETED] == 3
    assert not fewer.is_exact(JobState.COMPLETED)


async def test_terminal_states_stop_at_their_own_lower_cap(client: Client) -> None:
    """Completed (like failed and cancelled) stops at ``terminal_cap``; available keeps ``cap``."""
    client.task(kind="c_end", queue="c")(_noop)
    for n in range(3):
        await client.insert({"n": n}, kind="c_end", tags=["general"])
    for n in range(3):
        await client.insert({"n": n}, kind="c_end", queue="c_waiting")  # never worked
    while await work_one(client, ["c"]) is not None:
        pass
    async with (
        client.pool.acquire() as conn,
        conn.transaction(isolation="repeatable_read", readonly=True),
    ):
        tight = await counts(conn, cap=10, terminal_cap=2)
        roomy = await counts(conn, cap=10, terminal_cap=3)
        over = await counts(conn, cap=2, terminal_cap=5)  # the lower of the two caps
    assert tight.by_state[JobState.COMPLETED] == 2
    assert not tight.is_exact(JobState.COMPLETED)
    assert tight.by_state[JobState.AVAILABLE] == 3  # the live cap is 10
    assert tight.is_exact(JobState.AVAILABLE)
    assert roomy.by_state[JobState.COMPLETED] == 3
    assert roomy.capped == frozenset()
    assert over.by_state[JobState.COMPLETED] == 2
    assert over.capped == frozenset({JobState.COMPLETED, JobState.AVAILABLE})


# -- a tombstone that outlives its batch ------------------------------------------------------


@pytest.fixture
async def small_ring(migrated_dsn: str, schema: str) -> AsyncIterator[Client]:
    """3 slots per ring, so the third forced rotation prunes the first slot."""
    name = f"{schema}_c3"
    async with connect_once(migrated_dsn) as c:
        await c.execute("SELECT awa.install_queue_storage($1, 3, 3)", name)
    async with await Client.connect(migrated_dsn, name) as client:
        client.task(kind="c_filler", queue="filler")(_noop)
        client.task(kind="c_victim", queue="victim")(_noop)
        yield client


async def _rotate_queue(client: Client) -> RotateOutcome:
    async with client.pool.acquire() as c:
        return await rotate(c, "queue", timedelta(0), MaintenanceSettings(), True, force=True)


async def _complete_one(client: Client, kind: str, queue: str) -> int:
    inserted = await client.insert({"n": 0}, kind=kind)
    done = await work_one(client, [queue])
    assert done is not None
    assert done.row is not None
    assert done.row.storage_path == "compact"
    return inserted.id


async def test_a_tombstone_whose_batch_was_pruned_is_not_subtracted(small_ring: Client) -> None:
    """The batch sits in slot 0, its tombstone in slot 1 (current when it was deleted); pruning
    slot 0 removes the batch but not the tombstone, which used to make the count too low."""
    client = small_ring
    victim = await _complete_one(client, "c_victim", "victim")  # batch in slot 0
    assert await _rotate_queue(client) == RotateOutcome(True, False)  # 0 -> 1
    await client.delete_job(victim)  # tombstone in slot 1
    assert (await client.counts()).by_state[JobState.COMPLETED] == 0

    await _complete_one(client, "c_filler", "filler")  # slot 1
    assert await _rotate_queue(client) == RotateOutcome(True, False)  # 1 -> 2
    await _complete_one(client, "c_filler", "filler")  # slot 2
    assert await _rotate_queue(client) == RotateOutcome(True, True)  # 2 -> 0, slot 0 pruned

    async with client.pool.acquire() as c:
        assert await c.fetchval("SELECT count(*) FROM receipt_completion_tombstones") == 1
        assert (
            await c.fetchval(
                "SELECT count(*) FROM receipt_completion_batches"
                " WHERE job_ids @> ARRAY[$1::bigint]",
                victim,
            )
            == 0
        )
    after = await client.counts()
    assert after.by_state[JobState.COMPLETED] == 2  # the two fillers
    assert after.is_exact(JobState.COMPLETED)
    assert len(await client.list_jobs(state=JobState.COMPLETED)) == 2  # the page agrees
