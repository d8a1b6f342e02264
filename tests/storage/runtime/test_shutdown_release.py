"""A runtime that stops gives back the attempts it abandons: when the grace ends (or at once
with ``abandon=True``) each is retried right away with an error entry saying the worker shut
down, in one guarded write, not left running until rescue a heartbeat-staleness later. A
completion arriving after that is stale, and a runtime started again runs the job."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from storage import Client, Job, JobEvent, JobState
from storage.finalize import attempt_writes
from storage.finalize.types import AttemptRecord, AttemptRef, Outcome
from storage.ops.rescue import SHUTDOWN_REASON


def stuck_task(client: Client, entered: asyncio.Event, seen: list[Job[Any]]) -> None:
    """``stuck``: blocks until cancelled on its first attempt, completes on later ones."""

    @client.task(kind="stuck")
    async def stuck(job: Job[dict[str, int]]) -> None:
        if job.attempt == 1:
            seen.append(job)
            job.set_progress({"step": "halfway"})
            entered.set()
            await asyncio.Event().wait()


@pytest.mark.parametrize("stop", ["grace", "abandon"])
async def test_an_abandoned_attempt_is_given_back_at_once_and_runs_again(
    client: Client, conn: asyncpg.Connection, stop: str
) -> None:
    entered, seen = asyncio.Event(), list[Job[Any]]()
    stuck_task(client, entered, seen)
    events: list[JobEvent] = []
    client.on_event(events.append)
    row = await client.insert({"n": 1}, kind="stuck", max_attempts=3)
    await client.start(maintenance_interval=None)
    await asyncio.wait_for(entered.wait(), 10)
    if stop == "grace":
        await client.shutdown(grace=0.2)
    else:
        await client.shutdown(abandon=True)

    job = await client.get_job(row.id)
    assert job is not None
    assert job.state is JobState.RETRYABLE
    assert job.run_at <= datetime.now(UTC)  # due now, not after a backoff
    assert job.run_lease == seen[0].run_lease + 1
    (entry,) = job.errors
    assert (entry["attempt"], entry["error"], entry.get("terminal")) == (1, SHUTDOWN_REASON, None)
    assert job.progress == {"step": "halfway"}  # the handler's last progress is kept
    assert (await client.attempt_timeline(row.id))[0].outcome == "shutdown"
    assert [e.name for e in events if e.job_id == row.id] == ["started", "rescued"]

    # A completion of the abandoned attempt arriving late is stale: nothing is written.
    old = seen[0]
    assert old._claim_id is not None
    record = AttemptRecord(AttemptRef(old.id, old.run_lease, old._claim_id), 1, 3, None)
    late = await attempt_writes.complete_general(conn, record, keyed=False, outputs_supported=True)
    assert late.outcome is Outcome.STALE

    await client.run_until_idle()  # a runtime started again promotes the retry and runs it
    done = await client.get_job(row.id)
    assert done is not None
    assert (done.state, done.attempt) == (JobState.COMPLETED, 2)


async def test_an_abandoned_last_attempt_fails_saying_why(client: Client) -> None:
    entered, seen = asyncio.Event(), list[Job[Any]]()
    stuck_task(client, entered, seen)
    row = await client.insert({"n": 1}, kind="stuck", max_attempts=1)
    await client.start(maintenance_interval=None)
    await asyncio.wait_for(entered.wait(), 10)
    await client.shutdown(grace=0)
    job = await client.get_job(row.id)
    assert job is not None
    assert job.state is JobState.FAILED
    assert job.errors[-1]["error"] == f"{SHUTDOWN_REASON} (max attempts 1 exhausted)"


async def test_handlers_that_finish_within_the_grace_are_not_given_back(client: Client) -> None:
    release, entered = asyncio.Event(), asyncio.Event()

    @client.task(kind="prompt")
    async def prompt(job: Job[dict[str, int]]) -> None:
        entered.set()
        await release.wait()

    row = await client.insert({"n": 1}, kind="prompt")
    await client.start(maintenance_interval=None)
    await asyncio.wait_for(entered.wait(), 10)
    stopping = asyncio.create_task(client.shutdown(grace=30))
    release.set()
    await stopping
    job = await client.get_job(row.id)
    assert job is not None
    assert (job.state, job.errors) == (JobState.COMPLETED, [])
