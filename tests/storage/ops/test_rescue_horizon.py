"""The rescue horizon: it advances straight after a burst (no time rule), never past an open
attempt or a claim that has not committed yet, and an open attempt in an old batch is still
listed and rescued."""

from __future__ import annotations

import asyncpg

from storage import CallbackToken, Client, Job, JobState, WaitForCallback
from storage.db.pool import connect_once
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import CompactCompletion, Outcome
from storage.ops.maintenance import MaintenanceSettings
from storage.runtime.claim import claim_batch
from storage.testing import work_one

Args = dict[str, int]


async def _noop(job: Job[Args]) -> None:
    return None


async def _complete_all(client: Client, queues: list[str], n: int) -> list[int]:
    """Claim ``n`` jobs one batch each and complete them on the compact path; the claim ids."""
    claim_ids = []
    async with client.pool.acquire() as c:
        for _ in range(n):
            (job,) = await claim_batch(c, queues, 1, 1800.0)
            item = CompactCompletion(
                job.job_id, job.run_lease, job.claim_id, job.lane_seq, None, False
            )
            async with c.transaction():
                outcomes = await complete_compact(c, [item], outputs_supported=True)
            assert outcomes == [Outcome.WRITTEN]
            claim_ids.append(job.claim_id)
    return claim_ids


async def _horizon(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT rescue_horizon FROM maintenance_state"))


async def test_a_pass_straight_after_a_burst_moves_the_horizon_past_ended_batches(
    client: Client, conn: asyncpg.Connection
) -> None:
    client.task(kind="h_noop")(_noop)
    for i in range(5):
        await client.insert({"n": i}, kind="h_noop")
    claim_ids = await _complete_all(client, ["default"], 5)

    await client.run_maintenance()  # the claims are seconds old, not a minute

    assert await _horizon(conn) == max(claim_ids) + 1


async def test_an_open_attempt_in_an_old_batch_holds_the_horizon_and_is_listed_and_rescued(
    client: Client, conn: asyncpg.Connection
) -> None:
    client.task(kind="h_noop")(_noop)
    for i in range(4):
        await client.insert({"n": i}, kind="h_noop")
    async with client.pool.acquire() as c:
        (held,) = await claim_batch(c, ["default"], 1, 1800.0)  # the oldest batch stays open
    later = await _complete_all(client, ["default"], 3)

    await client.run_maintenance()

    assert await _horizon(conn) == held.claim_id  # not past it, although later batches ended
    assert [row.id for row in await client.list_jobs(state=JobState.RUNNING)] == [held.job_id]
    assert (await client.counts()).by_state[JobState.RUNNING] == 1
    assert held.claim_id < min(later)
    await conn.execute("UPDATE claim_batches SET claimed_at = now() - interval '10 minutes'")
    report = await client.run_maintenance(MaintenanceSettings(heartbeat_stale_seconds=60))
    assert report.rescued == 1
    assert (await client.counts()).by_state[JobState.RUNNING] == 0
    await client.run_maintenance()
    assert await _horizon(conn) == max(later) + 1


async def test_the_horizon_does_not_pass_a_claim_that_has_not_committed(
    client: Client, conn: asyncpg.Connection, migrated_dsn: str, schema: str
) -> None:
    """A claim holds its lane from before it takes its claim id until it commits. A pass that
    runs meanwhile must stop below that claim: it is invisible to the pass, and a horizon past
    it would hide its running job from reads and from rescue for good."""
    client.task(kind="h_noop")(_noop)
    for i in range(3):
        await client.insert({"n": i}, kind="h_noop")
    ended = await _complete_all(client, ["default"], 1)
    async with connect_once(migrated_dsn) as claimer:
        await claimer.execute(f"SET search_path TO {schema}")
        tx = claimer.transaction()
        await tx.start()
        (pending,) = await claim_batch(claimer, ["default"], 1, 1800.0)
        # Another lane's claim, taken after it, commits first.
        await client.insert({"n": 9}, kind="h_noop", queue="other")
        after = await _complete_all(client, ["other"], 1)
        assert pending.claim_id < after[0]

        await client.run_maintenance()

        assert await _horizon(conn) <= pending.claim_id
        await tx.commit()
    assert ended[0] < pending.claim_id
    assert [row.id for row in await client.list_jobs(state=JobState.RUNNING)] == [pending.job_id]
    await client.run_maintenance()
    assert await _horizon(conn) == pending.claim_id  # now committed, and still open


async def test_a_runtime_that_runs_out_of_work_moves_the_horizon_without_maintenance(
    client: Client, conn: asyncpg.Connection
) -> None:
    """Straight after a load, with no maintenance anywhere, open-attempt reads are bounded:
    the runtime moved the horizon past every batch it ran before it reported idle."""
    client.task(kind="h_noop")(_noop)
    await client.insert_many([{"n": i} for i in range(300)], kind="h_noop")

    await client.run_until_idle(maintenance_interval=None, claim_size=16)

    top = await conn.fetchval("SELECT max(claim_id) FROM claim_batches")
    assert await conn.fetchval("SELECT count(*) FROM claim_batches") > 1
    assert await _horizon(conn) == top + 1
    assert (await client.counts()).by_state[JobState.RUNNING] == 0


async def test_a_callback_waiting_in_an_old_batch_does_not_hold_the_horizon(
    client: Client, conn: asyncpg.Connection
) -> None:
    """A parked attempt has a state row, through which reads and rescue find it below the
    horizon: it no longer makes every read scan the batches claimed since it parked."""
    tokens: list[CallbackToken] = []

    @client.task(kind="h_park")
    async def park(job: Job[Args]) -> WaitForCallback:
        tokens.append(await job.register_callback(timeout_seconds=3600))
        return WaitForCallback(tokens[-1])

    parked = await client.insert({"n": 0}, kind="h_park")
    assert await work_one(client) is not None
    client.task(kind="h_noop")(_noop)
    for i in range(3):
        await client.insert({"n": i}, kind="h_noop")
    later = await _complete_all(client, ["default"], 3)

    await client.run_maintenance()

    assert await _horizon(conn) == max(later) + 1  # past the parked attempt's batch
    assert [r.id for r in await client.list_jobs(state=JobState.WAITING_EXTERNAL)] == [parked.id]
    assert (await client.counts()).by_state[JobState.WAITING_EXTERNAL] == 1
    row = await client.complete_external(tokens[0].callback_id, output={"paid": True})
    assert row.state is JobState.COMPLETED
    assert (await client.counts()).by_state[JobState.WAITING_EXTERNAL] == 0
    assert (await client.get_job(parked.id)) is not None


async def test_a_callback_timing_out_below_the_horizon_is_rescued(
    client: Client, conn: asyncpg.Connection
) -> None:
    tokens: list[CallbackToken] = []

    @client.task(kind="h_park")
    async def park(job: Job[Args]) -> WaitForCallback:
        tokens.append(await job.register_callback(timeout_seconds=3600))
        return WaitForCallback(tokens[-1])

    parked = await client.insert({"n": 0}, kind="h_park", max_attempts=1)
    assert await work_one(client) is not None
    client.task(kind="h_noop")(_noop)
    await client.insert({"n": 1}, kind="h_noop")
    later = await _complete_all(client, ["default"], 1)
    await client.run_maintenance()
    assert await _horizon(conn) == later[0] + 1

    await conn.execute("UPDATE attempt_state SET callback_timeout_at = now() - interval '1 s'")
    report = await client.run_maintenance()

    assert report.timed_out == 1
    failed = await client.get_job(parked.id)
    assert failed is not None
    assert failed.state is JobState.FAILED
    assert (await client.counts()).by_state[JobState.WAITING_EXTERNAL] == 0


async def test_a_long_handler_with_a_heartbeat_does_not_hold_the_horizon_and_is_rescued(
    client: Client, conn: asyncpg.Connection
) -> None:
    """A running attempt whose heartbeat wrote its state row is found below the horizon;
    when its heartbeat goes stale, the rescue still closes it."""
    client.task(kind="h_noop")(_noop)
    for i in range(3):
        await client.insert({"n": i}, kind="h_noop")
    async with client.pool.acquire() as c:
        (long,) = await claim_batch(c, ["default"], 1, 1800.0)
    await conn.execute(
        "INSERT INTO attempt_state (job_id, run_lease, claim_id, heartbeat_at)"
        " VALUES ($1, $2, $3, now())",
        long.job_id,
        long.run_lease,
        long.claim_id,
    )
    later = await _complete_all(client, ["default"], 2)

    await client.run_maintenance()

    assert await _horizon(conn) == max(later) + 1
    assert [r.id for r in await client.list_jobs(state=JobState.RUNNING)] == [long.job_id]
    await conn.execute("UPDATE attempt_state SET heartbeat_at = now() - interval '10 minutes'")
    report = await client.run_maintenance(MaintenanceSettings(heartbeat_stale_seconds=60))
    assert report.rescued == 1
    assert (await client.counts()).by_state[JobState.RUNNING] == 0
