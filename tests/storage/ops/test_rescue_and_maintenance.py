"""Maintenance against a real PostgreSQL: leadership, promotion, heartbeat / deadline rescue (and
the stale late completion of a presumed-dead worker), cancellation reaching a running handler,
and the rings: rotation, prune, tombstoned compact completions, failed-row carry-forward.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from storage import Client, Job, JobState, TerminalError, WaitForCallback
from storage.db.pool import connect_once
from storage.db.sql import MAINTENANCE_LEADER_LOCK_CLASS
from storage.finalize.attempt_writes import complete_general
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import AttemptRecord, AttemptRef, CompactCompletion, Outcome
from storage.ops.maintenance import MaintenanceSettings
from storage.ops.rings import RotateOutcome, rotate
from storage.runtime.claim import ClaimedJob, claim_batch
from storage.testing import work_one

Args = dict[str, int]
LEADER_KEY = MAINTENANCE_LEADER_LOCK_CLASS  # held for one schema: object hashtext(schema)


async def _noop(job: Job[Args]) -> None:
    return None


@pytest.fixture(autouse=True)
def _kinds(client: Client) -> None:
    """Kinds these tests insert without running a handler for them."""
    for kind in ("m_noop", "m_live"):
        client.task(kind=kind)(_noop)


async def _claim_one(client: Client, deadline: float = 1800.0) -> ClaimedJob:
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, ["default"], 1, deadline)
    return claimed


# -- leadership and promotion -----------------------------------------------------------------


async def test_only_the_lock_holder_leads_a_maintenance_pass(
    client: Client, conn: asyncpg.Connection, schema: str
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    job = await client.insert({"n": 1}, kind="m_noop", run_at=later)
    await conn.execute("UPDATE deferred_jobs SET run_at = now() - interval '1 second'")
    await conn.execute("SELECT pg_advisory_lock($1, hashtext($2))", LEADER_KEY, schema)
    try:
        report = await client.run_maintenance()
        assert report.leader is False
        assert report.promoted == 0
        row = await client.get_job(job.id)
        assert row is not None
        assert row.state is JobState.SCHEDULED
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1, hashtext($2))", LEADER_KEY, schema)

    report = await client.run_maintenance()
    assert report.leader is True
    assert report.promoted == 1
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.AVAILABLE
    # The pass gave leadership back: another connection can take it now.
    assert await conn.fetchval("SELECT pg_try_advisory_lock($1, hashtext($2))", LEADER_KEY, schema)
    await conn.execute("SELECT pg_advisory_unlock($1, hashtext($2))", LEADER_KEY, schema)


async def test_promotion_moves_only_due_deferred_jobs(
    client: Client, conn: asyncpg.Connection
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    due, not_due = await client.insert_many([{"n": 1}, {"n": 2}], kind="m_noop", run_at=later)
    await conn.execute(
        "UPDATE deferred_jobs SET run_at = now() - interval '1 second' WHERE job_id = $1", due.id
    )

    report = await client.run_maintenance()

    assert report.promoted == 1
    assert [r.id for r in await client.list_jobs(state=JobState.AVAILABLE)] == [due.id]
    assert [r.id for r in await client.list_jobs(state=JobState.SCHEDULED)] == [not_due.id]
    claimed = await _claim_one(client)
    assert claimed.job_id == due.id
    assert claimed.attempt == 1


# -- rescue -----------------------------------------------------------------------------------


async def test_stale_heartbeat_rescue_makes_the_late_completion_stale(
    client: Client, conn: asyncpg.Connection
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[int] = []

    @client.task(kind="m_slow")
    async def slow(job: Job[Args]) -> None:
        runs.append(job.attempt)
        if job.attempt == 1:
            started.set()
            await release.wait()
            job.set_output({"late": True})

    inserted = await client.insert({"n": 1}, kind="m_slow")
    worker = asyncio.create_task(work_one(client))
    await asyncio.wait_for(started.wait(), 5)
    # The worker stops heartbeating: its claim is ten minutes old and nothing refreshed it.
    await conn.execute("UPDATE claim_batches SET claimed_at = now() - interval '10 minutes'")

    report = await client.run_maintenance()

    assert report.rescued == 1
    closure = await conn.fetchrow("SELECT run_lease, outcome FROM attempt_closures")
    assert closure is not None
    assert dict(closure) == {"run_lease": 1, "outcome": "rescued"}
    rescued = await client.get_job(inserted.id)
    assert rescued is not None
    assert rescued.state is JobState.RETRYABLE
    (entry,) = rescued.errors
    assert entry["error"] == "heartbeat stale: worker presumed dead"
    assert "output" not in entry

    release.set()  # the presumed-dead worker finishes after all
    late = await asyncio.wait_for(worker, 5)
    assert late is not None
    assert late.ended.outcome is Outcome.STALE
    assert late.row is not None
    assert late.row.state is JobState.RETRYABLE
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 0

    assert (await client.run_maintenance()).promoted == 1
    again = await work_one(client)
    assert again is not None
    assert again.row is not None
    assert again.ended.outcome is Outcome.WRITTEN
    assert again.row.state is JobState.COMPLETED
    assert again.row.attempt == 2
    assert again.row.output is None  # the late attempt's output was never published
    assert runs == [1, 2]
    assert await conn.fetchval("SELECT count(*) FROM done_entries WHERE state = 'completed'") == 1
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0


async def test_a_fresh_heartbeat_keeps_an_old_claim_alive(
    client: Client, conn: asyncpg.Connection
) -> None:
    await client.insert({"n": 1}, kind="m_noop")
    claimed = await _claim_one(client)
    await conn.execute("UPDATE claim_batches SET claimed_at = now() - interval '10 minutes'")
    await conn.execute(
        "INSERT INTO attempt_state (job_id, run_lease, claim_id, heartbeat_at)"
        " VALUES ($1, $2, $3, now())",
        claimed.job_id,
        claimed.run_lease,
        claimed.claim_id,
    )
    assert (await client.run_maintenance()).rescued == 0
    assert (
        await client.run_maintenance(MaintenanceSettings(heartbeat_stale_seconds=0))
    ).rescued == 1


@pytest.mark.parametrize("dlq", [False, True])
async def test_deadline_rescue_retries_then_fails_when_attempts_are_exhausted(
    client: Client, conn: asyncpg.Connection, dlq: bool
) -> None:
    await client.configure_queue("default", dlq=dlq)
    job = await client.insert({"n": 1}, kind="m_noop", max_attempts=2)

    first = await _claim_one(client, deadline=0)
    assert (await client.run_maintenance()).rescued == 1
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.RETRYABLE
    assert [e["error"] for e in row.errors] == ["hard deadline exceeded"]
    async with client.pool.acquire() as c:
        assert await claim_batch(c, ["default"], 1, 60) == []  # closed, not yet runnable

    assert (await client.run_maintenance()).promoted == 1
    second = await _claim_one(client, deadline=0)
    assert second.run_lease == first.run_lease + 1
    assert second.attempt == 2
    assert (await client.run_maintenance()).rescued == 1

    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.FAILED
    last = row.errors[-1]
    assert last["error"].startswith("hard deadline exceeded")
    assert "exhausted" in last["error"]
    assert last["terminal"] is True
    assert (row.dlq is not None and row.dlq.reason == "max_attempts_exhausted") is dlq
    stale = AttemptRecord(AttemptRef(second.job_id, second.run_lease, second.claim_id), 2, 2, None)
    async with client.pool.acquire() as c:
        ended = await complete_general(c, stale, keyed=False, outputs_supported=True)
    assert ended.outcome is Outcome.STALE
    assert await conn.fetchval("SELECT count(*) FROM done_entries WHERE state = 'completed'") == 0


async def test_admin_cancel_reaches_the_running_handler(client: Client) -> None:
    started, finished = asyncio.Event(), asyncio.Event()
    observed: list[bool] = []
    events: list[str] = []

    @client.task(kind="m_cancellable")
    async def handler(job: Job[Args]) -> None:
        started.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(job.wait_cancelled(), 5)
        observed.append(job.is_cancelled())
        finished.set()

    client.on_event(lambda e: events.append(e.name), kinds=["m_cancellable"])
    inserted = await client.insert({"n": 1}, kind="m_cancellable")
    await client.start(maintenance_interval=None)
    try:
        await asyncio.wait_for(started.wait(), 5)
        cancelled = await client.cancel_job(inserted.id)
        await asyncio.wait_for(finished.wait(), 5)
    finally:
        await client.shutdown()

    assert observed == [True]  # told over LISTEN/NOTIFY, well before the 5 s bound
    assert cancelled is not None
    assert cancelled.state is JobState.CANCELLED
    row = await client.get_job(inserted.id)
    assert row is not None
    assert row.state is JobState.CANCELLED
    assert row.errors[-1]["error"] == "cancelled by operator"
    assert "completed" not in events  # the handler's own completion was stale


# -- rings, rotation and prune ----------------------------------------------------------------


@pytest.fixture
async def small_ring(migrated_dsn: str, schema: str) -> AsyncIterator[Client]:
    """A queue-storage schema with 3 slots per ring, so a full cycle takes three rotations."""
    name = f"{schema}_r3"
    async with connect_once(migrated_dsn) as c:
        await c.execute("SELECT awa.install_queue_storage($1, 3, 3)", name)
    async with await Client.connect(migrated_dsn, name) as client:
        client.task(kind="m_filler", queue="filler")(_noop)
        client.task(kind="m_live")(_noop)
        yield client


async def _rotate_queue(client: Client) -> RotateOutcome:
    async with client.pool.acquire() as c:
        return await rotate(c, "queue", timedelta(0), MaintenanceSettings(), True, force=True)


async def _fill_and_rotate(client: Client) -> RotateOutcome:
    """Some traffic in the current slot (rotation skips an idle one), then a forced rotation."""
    await client.insert({"n": 0}, kind="m_filler")
    done = await work_one(client, ["filler"])
    assert done is not None
    assert done.ended.outcome is Outcome.WRITTEN
    return await _rotate_queue(client)


async def _current_slot(client: Client) -> int:
    async with client.pool.acquire() as c:
        slot: int = await c.fetchval("SELECT current_slot FROM ring_state WHERE ring = 'queue'")
    return slot


async def test_installer_defaults_and_rotation_skips_an_idle_slot(
    client: Client, conn: asyncpg.Connection
) -> None:
    rings = await conn.fetch("SELECT ring, slot_count, current_slot FROM ring_state ORDER BY ring")
    assert [tuple(r) for r in rings] == [("claim", 8, 0), ("queue", 8, 0)]

    assert await _rotate_queue(client) == RotateOutcome(rotated=False, pruned=False)
    assert await conn.fetchval("SELECT generation FROM ring_state WHERE ring = 'queue'") == 0

    await client.insert({"n": 1}, kind="m_noop")
    assert await _rotate_queue(client) == RotateOutcome(rotated=True, pruned=False)
    row = await conn.fetchrow(
        "SELECT current_slot, generation FROM ring_state WHERE ring = 'queue'"
    )
    assert row is not None
    assert tuple(row) == (1, 1)
    assert await _rotate_queue(client) == RotateOutcome(rotated=False, pruned=False)  # idle again


async def test_run_pass_rotates_rings_that_are_due_and_in_use(client: Client) -> None:
    @client.task(kind="m_pass")
    async def handler(job: Job[Args]) -> None:
        return None

    due_now = MaintenanceSettings(
        queue_rotate_interval=timedelta(0), claim_rotate_interval=timedelta(0)
    )
    assert (await client.run_maintenance(due_now)).rotated == ()
    await client.insert({"n": 1}, kind="m_pass")
    assert await work_one(client) is not None
    assert (await client.run_maintenance()).rotated == ()  # in use, but not due yet
    assert (await client.run_maintenance(due_now)).rotated == ("queue", "claim")
    assert (await client.run_maintenance(due_now)).rotated == ()


async def test_deleted_compact_completion_is_hidden_until_prune_removes_it(
    small_ring: Client,
) -> None:
    client = small_ring

    @client.task(kind="m_victim")
    async def victim(job: Job[Args]) -> None:
        job.set_output({"secret": "bytes"})

    inserted = await client.insert({"n": 1}, kind="m_victim")
    done = await work_one(client)
    assert done is not None
    assert done.row is not None
    assert done.row.storage_path == "compact"

    await client.delete_job(inserted.id)

    async def batch_rows() -> int:
        async with client.pool.acquire() as c:
            n: int = await c.fetchval(
                "SELECT count(*) FROM receipt_completion_batches"
                " WHERE job_ids @> ARRAY[$1::bigint]",
                inserted.id,
            )
        return n

    assert await client.get_job(inserted.id) is None
    assert [r.id for r in await client.list_jobs(kind="m_victim")] == []
    async with client.pool.acquire() as c:
        assert (
            await c.fetchval("SELECT count(*) FROM terminal_jobs WHERE job_id = $1", inserted.id)
            == 0
        )
        assert await c.fetchval("SELECT count(*) FROM receipt_completion_tombstones") == 1
    assert await batch_rows() == 1  # hidden, but its bytes stay until prune

    assert await _rotate_queue(client) == RotateOutcome(True, False)  # 0 -> 1
    assert await _fill_and_rotate(client) == RotateOutcome(True, False)  # 1 -> 2
    assert await batch_rows() == 1
    assert await _fill_and_rotate(client) == RotateOutcome(True, True)  # 2 -> 0, slot 0 pruned

    assert await batch_rows() == 0
    assert await client.get_job(inserted.id) is None
    async with client.pool.acquire() as c:
        assert await c.fetchval("SELECT count(*) FROM receipt_completion_tombstones") == 0
        assert (
            await c.fetchval("SELECT count(*) FROM ready_entries WHERE job_id = $1", inserted.id)
            == 0
        )


async def test_failed_jobs_inside_retention_survive_prune(small_ring: Client) -> None:
    client = small_ring

    @client.task(kind="m_doomed")
    async def doomed(job: Job[Args]) -> None:
        job.set_output({"step": job.args["n"]})
        raise TerminalError("card declined")

    kept, expired = await client.insert_many([{"n": 1}, {"n": 2}], kind="m_doomed")
    for _ in range(2):
        assert await work_one(client) is not None
    async with client.pool.acquire() as c:
        await c.execute(
            "UPDATE done_entries SET finalized_at = now() - interval '100 days' WHERE job_id = $1",
            expired.id,
        )

    for _ in range(2):  # two full cycles of a 3-slot ring: the row is carried forward each time
        assert (await _fill_and_rotate(client)).rotated
        assert (await _fill_and_rotate(client)).rotated
        assert await _fill_and_rotate(client) == RotateOutcome(True, True)

    row = await client.get_job(kept.id)
    assert row is not None
    assert row.state is JobState.FAILED
    (entry,) = row.errors
    assert entry["error"] == "TerminalError: card declined"
    assert entry["output"] == {"step": 1}
    assert [r.id for r in await client.list_jobs(state=JobState.FAILED)] == [kept.id]
    assert await client.get_job(expired.id) is None  # outside failed_retention: pruned


@pytest.mark.parametrize("live_state", [JobState.AVAILABLE, JobState.RUNNING])
async def test_a_slot_holding_a_live_job_is_not_pruned(
    small_ring: Client, live_state: JobState
) -> None:
    client = small_ring
    live = await client.insert({"n": 1}, kind="m_live")
    claimed = await _claim_one(client) if live_state is JobState.RUNNING else None

    assert (await _fill_and_rotate(client)).rotated  # 0 -> 1
    assert (await _fill_and_rotate(client)).rotated  # 1 -> 2
    assert await _fill_and_rotate(client) == RotateOutcome(False, False)  # slot 0 is live
    assert await _current_slot(client) == 2

    row = await client.get_job(live.id)
    assert row is not None
    assert row.state is live_state
    if claimed is None:
        claimed = await _claim_one(client)
    item = CompactCompletion(
        claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, None, False
    )
    async with client.pool.acquire() as c:
        assert await complete_compact(c, [item], outputs_supported=True) == [Outcome.WRITTEN]

    assert await _rotate_queue(client) == RotateOutcome(True, True)  # now slot 0 can go
    assert await _current_slot(client) == 0


async def test_pruning_a_cancelled_unclaimed_job_leaves_no_phantom_work(small_ring: Client) -> None:
    client = small_ring
    cancelled = await client.insert({"n": 1}, kind="m_live", queue="quiet")  # no worker serves it
    await client.cancel_job(cancelled.id)
    assert (await client.counts()).by_state[JobState.AVAILABLE] == 0

    assert (await _fill_and_rotate(client)).rotated
    assert (await _fill_and_rotate(client)).rotated
    assert await _fill_and_rotate(client) == RotateOutcome(True, True)  # its slot is pruned

    assert await client.get_job(cancelled.id) is None
    assert (await client.counts()).by_state[JobState.AVAILABLE] == 0
    assert await client.list_jobs(state=JobState.AVAILABLE) == []
    async with asyncio.timeout(5):  # nothing is left to run in that queue
        await client.run_until_idle(["quiet"], maintenance_interval=None)
    later = await client.insert({"n": 2}, kind="m_live", queue="quiet")
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, ["quiet"], 5, 60)
    assert claimed.job_id == later.id


async def _rotate_claims(client: Client) -> RotateOutcome:
    async with client.pool.acquire() as c:
        return await rotate(c, "claim", timedelta(0), MaintenanceSettings(), True, force=True)


async def _claim_and_rotate(client: Client) -> RotateOutcome:
    """A claim in the current claim slot (an idle slot is not rotated), then a forced rotation."""
    await client.insert({"n": 0}, kind="m_filler")
    assert await work_one(client, ["filler"]) is not None
    return await _rotate_claims(client)


async def test_claim_ring_prune_waits_for_open_attempts_and_keeps_terminal_reads(
    small_ring: Client,
) -> None:
    client = small_ring
    tokens: list[str] = []

    @client.task(kind="m_mixed")
    async def mixed(job: Job[Args]) -> object:
        if job.args["n"] == 1:
            raise TerminalError("no")
        if job.args["n"] == 2:
            token = await job.register_callback(timeout_seconds=3600)
            tokens.append(token.callback_id)
            return WaitForCallback(token)
        return None

    compact, failed, parked = await client.insert_many(
        [{"n": 0}, {"n": 1}, {"n": 2}], kind="m_mixed"
    )
    for _ in range(3):
        assert await work_one(client) is not None  # all three claimed in claim slot 0

    assert (await _claim_and_rotate(client)).rotated  # 0 -> 1
    assert (await _claim_and_rotate(client)).rotated  # 1 -> 2
    assert await _claim_and_rotate(client) == RotateOutcome(False, False)  # parked attempt open

    await client.complete_external(tokens[0], output={"done": True})
    assert await _rotate_claims(client) == RotateOutcome(True, True)  # slot 0 truncated

    async with client.pool.acquire() as c:
        assert await c.fetchval("SELECT count(*) FROM claim_batches WHERE slot = 0") == 0
    states = [await client.get_job(j.id) for j in (compact, failed, parked)]
    assert [r.state if r else None for r in states] == [
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.COMPLETED,
    ]
    assert states[2] is not None
    assert states[2].output == {"done": True}
    assert (await client.run_maintenance()).rescued == 0  # nothing looks open without its claim


async def test_dlq_entries_past_retention_are_purged(client: Client) -> None:
    @client.task(kind="m_dead")
    async def dead(job: Job[Args]) -> None:
        raise TerminalError("dead")

    await client.configure_queue("default", dlq=True)
    old, recent = await client.insert_many([{"n": 1}, {"n": 2}], kind="m_dead")
    for _ in range(2):
        assert await work_one(client) is not None
    async with client.pool.acquire() as c:
        await c.execute(
            "UPDATE dlq_entries SET dlq_at = now() - interval '31 days' WHERE job_id = $1", old.id
        )

    report = await client.run_maintenance()

    assert report.dlq_purged == 1
    assert [r.id for r in await client.list_jobs(dlq=True)] == [recent.id]
    assert await client.get_job(old.id) is None
