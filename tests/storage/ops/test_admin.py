"""Operator actions against a real PostgreSQL: cancel, retry, delete, bulk actions with a dry-run
count, and the DLQ. Every action refuses a job in a state it does not apply to, naming the state.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import (
    CallbackNotFound,
    CallbackToken,
    Client,
    InvalidJobState,
    Job,
    JobNotFound,
    JobState,
    StaleAttempt,
    TerminalError,
    WaitForCallback,
)
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import CompactCompletion, Outcome
from storage.runtime.claim import ClaimedJob, claim_batch
from storage.testing import work_one
from tests.storage.observe import until

Args = dict[str, Any]


def _register(client: Client) -> list[CallbackToken]:
    """Handlers whose behaviour the args choose: complete, fail for good, or park."""
    tokens: list[CallbackToken] = []

    @client.task(kind="a_job")
    async def handler(job: Job[Args]) -> WaitForCallback | None:
        match job.args.get("do"):
            case "fail":
                raise TerminalError("boom")
            case "park":
                token = await job.register_callback(timeout_seconds=3600)
                tokens.append(token)
                return WaitForCallback(token)
            case _:
                return None

    return tokens


async def _claim(client: Client, queue: str = "default") -> ClaimedJob:
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, [queue], 1, 1800)
    return claimed


async def _job_in(client: Client, state: str, *, queue: str = "default") -> int:
    """A job in ``state`` (one of the lifecycle states, or ``dlq``)."""
    later = datetime.now(UTC) + timedelta(hours=1)
    match state:
        case "scheduled":
            return (await client.insert({"n": 1}, kind="a_job", run_at=later, queue=queue)).id
        case "available":
            return (await client.insert({"n": 1}, kind="a_job", queue=queue)).id
        case "running":
            await client.insert({"n": 1}, kind="a_job", queue=queue)
            return (await _claim(client, queue)).job_id
        case "retryable":
            job = await client.insert({"n": 1}, kind="a_job", queue=queue)
            claimed = await _claim(client, queue)
            async with client.pool.acquire() as c:
                await c.execute(
                    "UPDATE claim_batches SET deadline_at = now() - interval '1 second'"
                    " WHERE claim_id = $1",
                    claimed.claim_id,
                )
            assert (await client.run_maintenance()).rescued == 1
            return job.id
        case "waiting_external":
            job = await client.insert({"do": "park"}, kind="a_job", queue=queue)
            await work_one(client, [queue])
            return job.id
        case "completed" | "failed" | "dlq":
            await client.configure_queue(queue, dlq=state == "dlq")
            args = {"n": 1} if state == "completed" else {"do": "fail"}
            job = await client.insert(args, kind="a_job", queue=queue)
            await work_one(client, [queue])
            return job.id
        case "cancelled":
            job = await client.insert({"n": 1}, kind="a_job", queue=queue)
            await client.cancel_job(job.id)
            return job.id
    raise AssertionError(state)


async def _state_of(client: Client, job_id: int) -> str | None:
    row = await client.get_job(job_id)
    if row is None:
        return None
    return "dlq" if row.dlq is not None else row.state.value


# -- cancel -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state", ["available", "scheduled", "retryable", "running", "waiting_external"]
)
async def test_cancel_a_job_that_has_not_ended(
    client: Client, conn: asyncpg.Connection, state: str
) -> None:
    tokens = _register(client)
    job_id = await _job_in(client, state)
    assert await _state_of(client, job_id) == state

    row = await client.cancel_job(job_id)

    assert row is not None
    assert row.state is JobState.CANCELLED
    assert row.errors[-1]["error"] == "cancelled by operator"
    assert row.errors[-1]["terminal"]
    assert [r.id for r in await client.list_jobs(state=JobState.CANCELLED)] == [job_id]
    assert (await client.counts()).by_state[JobState(state)] == 0
    async with client.pool.acquire() as c:
        assert await claim_batch(c, ["default"], 10, 60) == []  # nothing left to run
    assert (await client.run_maintenance()).promoted == 0
    if state == "waiting_external":
        with pytest.raises(CallbackNotFound):
            await client.complete_external(tokens[0].callback_id, output=1)
    assert await _state_of(client, job_id) == "cancelled"
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1


async def test_cancel_makes_a_running_attempts_completion_stale(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    await client.insert({"n": 1}, kind="a_job")
    claimed = await _claim(client)
    await client.cancel_job(claimed.job_id)

    item = CompactCompletion(
        claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, '"late"', False
    )
    async with client.pool.acquire() as c:
        assert await complete_compact(c, [item], outputs_supported=True) == [Outcome.STALE]
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0
    row = await client.get_job(claimed.job_id)
    assert row is not None
    assert row.state is JobState.CANCELLED
    assert row.output is None


async def test_cancel_wakes_a_handler_waiting_in_wait_for_callback(client: Client) -> None:
    loop = asyncio.get_running_loop()
    registered: asyncio.Future[CallbackToken] = loop.create_future()
    saw: list[str] = []

    @client.task(kind="a_seq")
    async def handler(job: Job[Args]) -> None:
        token = await job.register_callback(timeout_seconds=3600)
        registered.set_result(token)
        try:
            await job.wait_for_callback(token)
        except StaleAttempt:
            saw.append("stale")

    inserted = await client.insert({"n": 1}, kind="a_seq")
    worker = asyncio.create_task(work_one(client))
    await asyncio.wait_for(registered, 5)
    await until(lambda: _is(client, inserted.id, "waiting_external"))

    await client.cancel_job(inserted.id)
    result = await asyncio.wait_for(worker, 5)

    assert saw == ["stale"]
    assert result is not None
    assert result.ended.outcome is Outcome.STALE
    assert await _state_of(client, inserted.id) == "cancelled"


async def _is(client: Client, job_id: int, state: str) -> bool:
    return await _state_of(client, job_id) == state


# -- every action refuses the states it does not apply to --------------------------------------

REFUSALS = [
    ("cancel_job", "completed"),
    ("cancel_job", "failed"),
    ("cancel_job", "cancelled"),
    ("cancel_job", "dlq"),
    ("retry_job", "available"),
    ("retry_job", "scheduled"),
    ("retry_job", "running"),
    ("retry_job", "waiting_external"),
    ("retry_job", "completed"),
    ("delete_job", "available"),
    ("delete_job", "scheduled"),
    ("delete_job", "running"),
    ("delete_job", "retryable"),
    ("delete_job", "waiting_external"),
    ("retry_dlq", "failed"),
    ("retry_dlq", "available"),
    ("purge_dlq", "failed"),
    ("purge_dlq", "completed"),
]


@pytest.mark.parametrize(("action", "state"), REFUSALS)
async def test_actions_refuse_states_they_do_not_apply_to(
    client: Client, conn: asyncpg.Connection, action: str, state: str
) -> None:
    _register(client)
    job_id = await _job_in(client, state)
    before = await client.get_job(job_id)
    closures = await conn.fetchval("SELECT count(*) FROM attempt_closures")

    with pytest.raises(InvalidJobState) as refused:
        await getattr(client, action)(job_id)

    named = "dead-lettered" if state == "dlq" else state
    assert f"Job {job_id} is {named}, so it cannot be" in str(refused.value)
    assert refused.value.state == named
    assert await client.get_job(job_id) == before  # nothing changed
    assert await conn.fetchval("SELECT count(*) FROM attempt_closures") == closures


@pytest.mark.parametrize("action", ["cancel_job", "retry_job", "delete_job", "retry_dlq"])
async def test_actions_on_an_unknown_job_say_so(client: Client, action: str) -> None:
    with pytest.raises(JobNotFound, match="Job 999 does not exist"):
        await getattr(client, action)(999)


# -- retry ------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["failed", "cancelled"])
async def test_retry_runs_a_failed_or_cancelled_job_again_from_attempt_zero(
    client: Client, state: str
) -> None:
    _register(client)
    job_id = await _job_in(client, state)
    ended = await client.get_job(job_id)
    assert ended is not None
    assert ended.errors

    row = await client.retry_job(job_id)

    assert row is not None
    assert row.id == job_id
    assert row.state is JobState.AVAILABLE
    assert row.attempt == 0
    assert row.run_lease == ended.run_lease + 1
    assert row.errors == ended.errors  # history kept
    await client.run_until_idle(maintenance_interval=None)  # it runs again, once
    rerun = await client.get_job(job_id)
    assert rerun is not None
    assert rerun.attempt == 1
    assert rerun.run_lease == row.run_lease
    if state == "failed":  # the handler fails it again: a second entry after the kept ones
        assert rerun.state is JobState.FAILED
        assert [e["error"] for e in rerun.errors] == ["TerminalError: boom"] * 2
    else:
        assert rerun.state is JobState.COMPLETED


async def test_a_claim_is_not_used_up_by_cancelled_rows_ahead_of_a_live_one(
    client: Client,
) -> None:
    _register(client)
    cancelled = await _job_in(client, "cancelled")
    live = await _job_in(client, "available")
    async with client.pool.acquire() as c:
        claimed = await claim_batch(c, ["default"], 1, 1800)
    assert [j.job_id for j in claimed] == [live]
    assert await _state_of(client, cancelled) == "cancelled"


async def test_retry_a_deleted_job_is_not_found(client: Client) -> None:
    _register(client)
    job_id = await _job_in(client, "failed")
    await client.delete_job(job_id)
    with pytest.raises(JobNotFound):
        await client.retry_job(job_id)


# -- delete -----------------------------------------------------------------------------------


async def test_delete_a_compact_completion_writes_a_tombstone_and_hides_it(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    job_id = await _job_in(client, "completed")
    kept = await _job_in(client, "completed")
    row = await client.get_job(job_id)
    assert row is not None
    assert row.storage_path == "compact"

    await client.delete_job(job_id)

    assert await client.get_job(job_id) is None
    assert [r.id for r in await client.list_jobs()] == [kept]
    assert [r.id for r in await client.list_jobs(state=JobState.COMPLETED)] == [kept]
    assert await conn.fetchval("SELECT count(*) FROM terminal_jobs WHERE job_id = $1", job_id) == 0
    assert (await client.counts()).by_state[JobState.COMPLETED] == 1
    tomb = await conn.fetchrow("SELECT job_id, run_lease FROM receipt_completion_tombstones")
    assert tomb is not None
    assert tuple(tomb) == (job_id, 1)
    # The batch row still holds the job until its slot is pruned.
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM receipt_completion_batches WHERE job_ids @> ARRAY[$1::bigint]",
            job_id,
        )
        == 1
    )
    with pytest.raises(JobNotFound):
        await client.delete_job(job_id)


@pytest.mark.parametrize("state", ["completed", "failed", "cancelled"])
async def test_delete_a_general_path_job_removes_its_done_entry(
    client: Client, conn: asyncpg.Connection, state: str
) -> None:
    _register(client)
    if state == "completed":
        job_id = (await client.insert({"n": 1}, kind="a_job", tags=["general"])).id
        await work_one(client)
    else:
        job_id = await _job_in(client, state)
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state.value == state
    assert row.storage_path == "general"

    await client.delete_job(job_id)

    assert await conn.fetchval("SELECT count(*) FROM done_entries WHERE job_id = $1", job_id) == 0
    assert await client.get_job(job_id) is None
    assert await client.list_jobs() == []
    assert await conn.fetchval("SELECT count(*) FROM terminal_jobs") == 0
    assert (await client.counts()).total == 0


async def test_delete_a_cancelled_scheduled_job_hides_it(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    job_id = await _job_in(client, "scheduled")
    await client.cancel_job(job_id)

    await client.delete_job(job_id)

    assert await client.get_job(job_id) is None
    assert await client.list_jobs() == []
    assert (await client.counts()).total == 0


# -- bulk actions -----------------------------------------------------------------------------


async def test_bulk_retry_by_filter_reports_the_count_before_acting(client: Client) -> None:
    _register(client)
    failed_here = [await _job_in(client, "failed") for _ in range(3)]
    failed_elsewhere = await _job_in(client, "failed", queue="other")
    await _job_in(client, "available")

    where: dict[str, Any] = {"state": JobState.FAILED, "queue": "default"}
    assert await client.count_matching(**where) == 3
    assert await client.bulk_action("retry", dry_run=True, **where) == 3
    assert await client.count_matching(**where) == 3  # the dry run touched nothing

    assert await client.bulk_action("retry", **where) == 3

    assert [await _state_of(client, i) for i in failed_here] == ["available"] * 3
    assert await _state_of(client, failed_elsewhere) == "failed"
    assert await client.count_matching(**where) == 0


async def test_bulk_cancel_by_filter(client: Client) -> None:
    _register(client)
    targets = [await _job_in(client, "available", queue="bulk") for _ in range(4)]
    bystander = await _job_in(client, "available")

    assert await client.count_matching(state=JobState.AVAILABLE, queue="bulk") == 4
    assert await client.bulk_action("cancel", state=JobState.AVAILABLE, queue="bulk") == 4

    assert [await _state_of(client, i) for i in targets] == ["cancelled"] * 4
    assert await _state_of(client, bystander) == "available"


async def test_bulk_action_skips_jobs_that_moved_on(client: Client) -> None:
    _register(client)
    completed = await _job_in(client, "completed")
    available = await _job_in(client, "available")

    # One of the two selected jobs is no longer cancellable: the other is still cancelled.
    assert await client.bulk_action("cancel", ids=[available, completed]) == 1
    assert await _state_of(client, available) == "cancelled"
    assert await _state_of(client, completed) == "completed"


async def test_bulk_action_refuses_an_unknown_action(client: Client) -> None:
    from storage import AwaError

    with pytest.raises(AwaError, match="Unknown bulk action 'explode'"):
        await client.bulk_action("explode", ids=[1])


# -- dead-letter queue ------------------------------------------------------------------------


async def test_dlq_list_retry_and_purge(client: Client, conn: asyncpg.Connection) -> None:
    _register(client)
    first = await _job_in(client, "dlq")
    second = await _job_in(client, "dlq")
    await _job_in(client, "completed")

    listed = await client.list_jobs(dlq=True)
    assert [r.id for r in listed] == [second, first]
    assert all(r.dlq is not None and r.dlq.reason == "terminal_error" for r in listed)
    assert await client.count_matching(dlq=True) == 2
    assert (await client.counts()).dlq == 2

    row = await client.retry_dlq(first)

    assert row is not None
    assert row.id == first
    assert row.dlq is None
    assert row.state is JobState.AVAILABLE
    assert row.attempt == 0
    assert [e["error"] for e in row.errors] == ["TerminalError: boom"]
    assert [r.id for r in await client.list_jobs(dlq=True)] == [second]

    await client.purge_dlq(second)

    assert await client.get_job(second) is None
    assert await client.list_jobs(dlq=True) == []
    assert await conn.fetchval("SELECT count(*) FROM dlq_entries") == 0


async def test_bulk_retry_of_the_dlq(client: Client) -> None:
    _register(client)
    ids = [await _job_in(client, "dlq") for _ in range(3)]
    assert await client.bulk_action("retry_dlq", dry_run=True, dlq=True) == 3
    assert await client.bulk_action("retry_dlq", dlq=True) == 3
    assert [await _state_of(client, i) for i in ids] == ["available"] * 3
    assert await client.list_jobs(dlq=True) == []


async def test_purge_of_an_unknown_dlq_job_is_not_found(client: Client) -> None:
    with pytest.raises(JobNotFound):
        await client.purge_dlq(12345)


async def test_cancel_of_a_job_id_that_was_never_inserted_names_it(client: Client) -> None:
    missing = uuid.uuid4().int % 10_000 + 10_000
    with pytest.raises(JobNotFound, match=str(missing)):
        await client.cancel_job(missing)
