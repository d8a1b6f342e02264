"""General-path completions flushed together (``general_writes``), and external completions
through the same guarded statement: what is written, what a stale attempt leaves alone, and
that every refused external completion writes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from storage import CallbackNotFound, Client, Job, JobState, OutputError, StaleAttempt
from storage.finalize.attempt_writes import fail, lock_attempt
from storage.finalize.rules import Failure
from storage.finalize.types import AttemptRecord, AttemptRef, GeneralCompletion, Outcome
from storage.ops.callbacks import ExternalCompletion
from storage.runtime.batcher import CompletionBatcher
from storage.runtime.claim import ClaimedJob, claim_batch
from storage.testing import work_one
from storage.values.results import WaitForCallback
from tests.storage.observe import until


class Tagged(BaseModel):
    n: int


class Other(BaseModel):
    n: int


async def _claim(client: Client, count: int) -> list[ClaimedJob]:
    """Insert ``count`` jobs with tags (the general path) and claim them."""

    @client.task(Tagged)
    async def handle(job: Job[Tagged]) -> None:
        return None

    await client.insert_many([Tagged(n=i) for i in range(count)], tags=["t"])
    async with client.pool.acquire() as c:
        return await claim_batch(c, ["default"], count, 1800.0)


def _item(claimed: ClaimedJob, output: str | None, *, keyed: bool = False) -> GeneralCompletion:
    ref = AttemptRef(claimed.job_id, claimed.run_lease, claimed.claim_id)
    return GeneralCompletion(ref, claimed.attempt, output, keyed)


async def _written_rows(conn: asyncpg.Connection) -> tuple[int, int]:
    closures = await conn.fetchval("SELECT count(*) FROM attempt_closures")
    done = await conn.fetchval("SELECT count(*) FROM done_entries")
    return closures, done


async def test_general_completions_submitted_together_commit_in_one_transaction(
    client: Client, conn: asyncpg.Connection
) -> None:
    claimed = await _claim(client, 5)
    batcher = CompletionBatcher(client.pool, client.outputs_supported)
    futures = [batcher.submit_general(_item(c, f'{{"n":{c.job_id}}}')) for c in claimed]
    await batcher.drain()
    assert [f.result() for f in futures] == [Outcome.WRITTEN] * 5
    assert await conn.fetchval("SELECT count(DISTINCT xmin::text) FROM done_entries") == 1
    assert await conn.fetchval("SELECT count(*) FROM attempt_closures") == 5
    for c in claimed:
        row = await client.get_job(c.job_id)
        assert row is not None
        assert row.state is JobState.COMPLETED
        assert row.storage_path == "general"
        assert row.tags == ["t"]
        assert row.output_text == f'{{"n":{c.job_id}}}'


async def test_a_stale_attempt_in_a_general_flush_writes_nothing_and_the_rest_complete(
    client: Client, conn: asyncpg.Connection
) -> None:
    """One flush: an attempt an operator cancelled (stale), one this batcher already
    completed (a retry after a lost acknowledgement: already), and a fresh one."""
    cancelled, earlier, fresh = await _claim(client, 3)
    await client.cancel_job(cancelled.job_id)
    batcher = CompletionBatcher(client.pool, client.outputs_supported)
    assert await batcher.submit_general(_item(earlier, '{"first":1}')) is Outcome.WRITTEN
    before = await _written_rows(conn)

    futures = [
        batcher.submit_general(_item(cancelled, '{"late":1}')),
        batcher.submit_general(_item(earlier, '{"first":1}')),
        batcher.submit_general(_item(fresh, '{"fresh":1}')),
    ]
    await batcher.drain()

    assert [f.result() for f in futures] == [Outcome.STALE, Outcome.ALREADY, Outcome.WRITTEN]
    assert await _written_rows(conn) == (before[0] + 1, before[1] + 1)  # the fresh one only
    gone = await client.get_job(cancelled.job_id)
    assert gone is not None
    assert gone.state is JobState.CANCELLED
    assert gone.output is None
    kept = await client.get_job(earlier.job_id)
    assert kept is not None
    assert kept.output == {"first": 1}
    done = await client.get_job(fresh.job_id)
    assert done is not None
    assert done.output == {"fresh": 1}


async def test_a_general_flush_releases_unique_keys(client: Client) -> None:
    @client.task(Tagged)
    async def handle(job: Job[Tagged]) -> None:
        job.set_output({"n": job.args.n})

    first = await client.insert(Tagged(n=1), unique_key="k")
    assert (await client.insert(Tagged(n=2), unique_key="k")).duplicate
    await client.run_until_idle(maintenance_interval=None)
    row = await client.get_job(first.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.output == {"n": 1}
    assert row.holds_unique_key is False
    again = await client.insert(Tagged(n=3), unique_key="k")
    assert not again.duplicate


def _parking_task(client: Client) -> list[str]:
    callbacks: list[str] = []

    @client.task(Tagged, output=Tagged)
    async def park(job: Job[Tagged]) -> WaitForCallback:
        token = await job.register_callback(3600)
        callbacks.append(token.callback_id)
        return WaitForCallback(token)

    return callbacks


async def _parked(client: Client, **insert: Any) -> tuple[int, str]:
    callbacks = _parking_task(client)
    job = await client.insert(Tagged(n=1), **insert)
    parked = await work_one(client)
    assert parked is not None
    assert parked.ended.state is JobState.WAITING_EXTERNAL
    (callback_id,) = callbacks
    return job.id, callback_id


async def test_external_completion_answers_the_row_get_job_reads(client: Client) -> None:
    job_id, callback_id = await _parked(client, tags=["a"], metadata={"m": 1}, unique_key="u")
    answered = await client.complete_external(callback_id, output=Tagged(n=7))
    read = await client.get_job(job_id)
    assert read is not None
    added_by_client_get_job = {"unique_states", "holds_unique_key", "declared_output_type"}
    assert answered.model_dump(exclude=added_by_client_get_job) == read.model_dump(
        exclude=added_by_client_get_job
    )
    assert answered.state is JobState.COMPLETED
    assert answered.output == {"n": 7}
    assert read.holds_unique_key is False


async def _unchanged_after(
    client: Client, conn: asyncpg.Connection, job_id: int, callback_id: str, call: Any
) -> None:
    """Run ``call`` (expected to raise) and check it wrote nothing: no closure, no done row,
    the callback still waiting and the job still ``waiting_external``."""
    before = await _written_rows(conn)
    state = await conn.fetchrow(
        "SELECT callback_id, callback_resolved, state FROM attempt_state WHERE job_id = $1",
        job_id,
    )
    await call
    assert await _written_rows(conn) == before
    assert (
        await conn.fetchrow(
            "SELECT callback_id, callback_resolved, state FROM attempt_state WHERE job_id = $1",
            job_id,
        )
        == state
    )
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    assert row.callback is not None
    assert row.callback.callback_id == callback_id


async def test_unknown_callback_id_writes_nothing(client: Client, conn: asyncpg.Connection) -> None:
    job_id, callback_id = await _parked(client)
    unknown = "00000000-0000-0000-0000-000000000000"

    async def call() -> None:
        with pytest.raises(CallbackNotFound, match=f"No job is waiting for callback {unknown}"):
            await client.complete_external(unknown, output=Tagged(n=1))

    await _unchanged_after(client, conn, job_id, callback_id, call())


async def test_stale_run_lease_writes_nothing(client: Client, conn: asyncpg.Connection) -> None:
    job_id, callback_id = await _parked(client)

    async def call() -> None:
        with pytest.raises(StaleAttempt, match=r"belongs to run lease 1 of job \d+, not 7"):
            await client.complete_external(callback_id, output=Tagged(n=1), run_lease=7)

    await _unchanged_after(client, conn, job_id, callback_id, call())


async def test_invalid_output_writes_nothing(client: Client, conn: asyncpg.Connection) -> None:
    job_id, callback_id = await _parked(client)

    async def call() -> None:
        with pytest.raises(OutputError, match="output does not fit Tagged"):
            await client.complete_external(callback_id, output={"n": "not a number"})

    await _unchanged_after(client, conn, job_id, callback_id, call())


async def test_output_for_another_kind_writes_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    job_id, callback_id = await _parked(client)
    opts = ExternalCompletion().output_for("other", Other, Other(n=1))

    async def call() -> None:
        with pytest.raises(OutputError, match="is of kind 'tagged', not 'other'"):
            await client.complete_external_with(callback_id, opts)

    await _unchanged_after(client, conn, job_id, callback_id, call())


async def test_external_completion_that_loses_the_lock_race_writes_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The completion finds the callback, then waits for the attempt's lock while another
    transaction ends the attempt: its guard, under the lock, refuses and it writes nothing."""
    job_id, callback_id = await _parked(client)
    found = await conn.fetchrow(
        "SELECT job_id, run_lease, claim_id FROM attempt_state WHERE callback_id = $1", callback_id
    )
    assert found is not None
    ref = AttemptRef(found["job_id"], found["run_lease"], found["claim_id"])
    record = AttemptRecord(ref, 1, 25, None)
    async with client.pool.acquire() as holder, holder.transaction():
        await lock_attempt(holder, ref)
        completing = asyncio.ensure_future(
            client.complete_external(callback_id, output=Tagged(n=1))
        )

        async def waiting_for_the_lock() -> bool:
            return bool(
                await conn.fetchval(
                    "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                )
            )

        await until(waiting_for_the_lock)
        ended = await fail(holder, record, Failure.TERMINAL, "ended first", outputs_supported=True)
        assert ended.outcome is Outcome.WRITTEN
    with pytest.raises(CallbackNotFound, match="was resolved by someone else first"):
        await completing
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.FAILED
    assert row.output is None
    assert await conn.fetchval("SELECT count(*) FROM attempt_closures") == 1
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1


async def test_a_rescued_attempt_and_its_jobs_next_attempt_in_one_flush_are_told_apart(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The rescued attempt's late completion is stale and writes nothing; the next attempt of
    the same job, completed in the same flush, is written with its own output."""

    @client.task(Tagged)
    async def handle(job: Job[Tagged]) -> None:
        return None

    job = await client.insert(Tagged(n=1), tags=["t"])
    async with client.pool.acquire() as c:
        (old,) = await claim_batch(c, ["default"], 1, 0.0)
    assert (await client.run_maintenance()).rescued == 1
    await client.run_maintenance()  # promotes the immediate retry
    (new,) = await _claim_existing(client)
    assert (new.job_id, new.run_lease) == (job.id, old.run_lease + 1)
    batcher = CompletionBatcher(client.pool, client.outputs_supported)
    late = batcher.submit_general(_item(old, '{"from":"rescued"}'))
    fresh = batcher.submit_general(_item(new, '{"from":"next"}'))
    await batcher.drain()
    assert (late.result(), fresh.result()) == (Outcome.STALE, Outcome.WRITTEN)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.output == {"from": "next"}
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1


async def _claim_existing(client: Client) -> list[ClaimedJob]:
    async with client.pool.acquire() as c:
        return await claim_batch(c, ["default"], 1, 1800.0)
