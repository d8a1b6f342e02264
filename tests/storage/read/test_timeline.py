"""Attempt timelines: each readiness of a job with its claim, its open-attempt state and how it
ended, read from what storage already keeps."""

from __future__ import annotations

from typing import Any

import asyncpg

from storage import Client, Job, JobState, WaitForCallback
from storage.testing import work_one
from tests.storage.observe import until

Args = dict[str, Any]


async def test_a_failed_then_completed_job_has_two_attempts_with_outcomes(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(kind="flaky")
    async def flaky(job: Job[Args]) -> None:
        if job.attempt == 1:
            raise ValueError("first try fails")

    job = await client.insert({}, kind="flaky")
    await work_one(client)
    await conn.execute("UPDATE deferred_jobs SET run_at = now()")
    await client.run_maintenance()
    await work_one(client)
    first, second = await client.attempt_timeline(job.id)
    assert (first.attempt, first.outcome) == (1, "retried")
    assert (second.attempt, second.outcome) == (2, "completed")
    for span in (first, second):
        assert span.claimed_at is not None
        assert span.ended_at is not None
        assert span.duration is not None
        assert span.duration.total_seconds() >= 0
    assert second.ready_at >= first.ready_at


async def test_a_waiting_attempt_shows_its_callback_and_no_end(client: Client) -> None:
    @client.task(kind="hook")
    async def hook(job: Job[Args]) -> WaitForCallback:
        token = await job.register_callback(timeout_seconds=600)
        return WaitForCallback(token)

    job = await client.insert({}, kind="hook")
    await work_one(client)

    async def waiting() -> bool:
        row = await client.get_job(job.id)
        return row is not None and row.state is JobState.WAITING_EXTERNAL

    await until(waiting)
    (span,) = await client.attempt_timeline(job.id)
    assert span.waiting
    assert span.callback_id is not None
    assert span.callback_timeout_at is not None
    assert span.outcome is None
    assert span.ended_at is None


async def test_an_unclaimed_job_has_one_ready_span_and_an_unknown_job_none(
    client: Client,
) -> None:
    @client.task(kind="never", queue="elsewhere")
    async def never(job: Job[Args]) -> None:
        return None

    job = await client.insert({}, kind="never")
    (span,) = await client.attempt_timeline(job.id)
    assert (span.attempt, span.claimed_at, span.outcome) == (None, None, None)
    assert await client.attempt_timeline(10**12) == []
