"""Every failure path of an attempt, against a real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Cancel, Client, Job, JobState, RetryAfter, Snooze, TerminalError
from storage.finalize.rules import MAX_BACKOFF_SECONDS, backoff_seconds
from storage.testing import work_one


class Work(BaseModel):
    n: int = 0


def register(client: Client, behaviour: object) -> None:
    @client.task(Work)
    async def handler(job: Job[Work]) -> object:
        if isinstance(behaviour, BaseException):
            raise behaviour
        return behaviour


async def test_exception_retries_with_backoff_and_an_error_entry(client: Client) -> None:
    register(client, ValueError("upstream said no"))
    job = await client.insert(Work())
    before = datetime.now(UTC)
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    row = result.row
    assert row.state is JobState.RETRYABLE
    assert row.attempt == 1
    assert row.run_lease == 2
    (entry,) = row.errors
    assert entry["error"] == "ValueError: upstream said no"
    assert entry["attempt"] == 1
    assert "terminal" not in entry
    assert "output" not in entry
    delay = (row.run_at - before).total_seconds()
    assert 2.0 - 1 <= delay <= 2.0 * 1.25 + 1  # 2^1 s plus up to 25% jitter (1 s of slack)
    assert job.id == row.id


def test_backoff_bounds_grow_exponentially_and_cap() -> None:
    import random

    rng = random.Random(7)
    for attempt in range(1, 20):
        base = min(2.0**attempt, MAX_BACKOFF_SECONDS)
        samples = [backoff_seconds(attempt, rng) for _ in range(50)]
        assert all(base <= s <= base * 1.25 for s in samples)
    assert backoff_seconds(40, rng) <= MAX_BACKOFF_SECONDS * 1.25


async def test_terminal_error_fails_without_retry(client: Client) -> None:
    register(client, TerminalError("bad invoice"))
    await client.insert(Work(), max_attempts=5)
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.FAILED
    (entry,) = result.row.errors
    assert entry["terminal"] is True
    assert entry["error"].startswith("TerminalError: bad invoice")


async def test_exhausting_max_attempts_fails_with_a_terminal_entry(client: Client) -> None:
    register(client, RuntimeError("flaky"))
    await client.insert(Work(), max_attempts=1)
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.FAILED
    assert result.row.dlq is None
    (entry,) = result.row.errors
    assert entry["terminal"] is True
    assert "max attempts 1 exhausted" in entry["error"]


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [(TerminalError("nope"), "terminal_error"), (RuntimeError("flaky"), "max_attempts_exhausted")],
)
async def test_dead_letter_queue_reasons(
    client: Client, conn: asyncpg.Connection, behaviour: BaseException, reason: str
) -> None:
    await client.configure_queue("default", dlq=True)
    register(client, behaviour)
    job = await client.insert(Work(), max_attempts=1)
    await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.FAILED
    assert row.dlq is not None
    assert row.dlq.reason == reason
    assert row.dlq.original_run_lease == 1
    assert [r.id for r in await client.list_jobs(dlq=True)] == [job.id]
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 0


async def test_retry_from_dlq_keeps_id_and_errors_and_moves_the_lease_on(client: Client) -> None:
    await client.configure_queue("default", dlq=True)
    register(client, TerminalError("nope"))
    job = await client.insert(Work())
    await work_one(client)
    retried = await client.retry_dlq(job.id)
    assert retried is not None
    assert (retried.id, retried.state, retried.attempt) == (job.id, JobState.AVAILABLE, 0)
    assert retried.run_lease == 2
    assert len(retried.errors) == 1
    again = await work_one(client)
    assert again is not None
    assert again.row is not None
    assert again.row.run_lease == 2
    assert again.row.dlq is not None
    assert len(again.row.errors) == 2
    await client.purge_dlq(job.id)
    assert await client.get_job(job.id) is None


async def test_retry_after_without_output_writes_no_entry_but_counts_the_attempt(
    client: Client,
) -> None:
    register(client, RetryAfter(30))
    await client.insert(Work())
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.RETRYABLE
    assert result.row.attempt == 1
    assert result.row.errors == []
    assert 25 <= (result.row.run_at - datetime.now(UTC)).total_seconds() <= 31


async def test_snooze_gives_the_attempt_back(client: Client) -> None:
    register(client, Snooze(60))
    await client.insert(Work())
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.SCHEDULED
    assert result.row.attempt == 0
    assert result.row.run_lease == 2
    assert result.row.errors == []


async def test_cancel_from_the_handler_ends_cancelled_with_its_reason(client: Client) -> None:
    register(client, Cancel("customer closed the account"))
    await client.insert(Work())
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.CANCELLED
    assert result.row.errors[-1]["error"] == "customer closed the account"


async def test_a_retried_job_completes_on_the_general_path_with_its_history(
    client: Client, conn: asyncpg.Connection
) -> None:
    calls: list[int] = []

    @client.task(Work)
    async def flaky(job: Job[Work]) -> None:
        calls.append(job.attempt)
        if job.attempt == 1:
            raise RuntimeError("first time fails")

    job = await client.insert(Work())
    await work_one(client)
    await conn.execute("UPDATE deferred_jobs SET run_at = now()")
    await client.run_maintenance()
    result = await work_one(client)
    assert calls == [1, 2]
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.COMPLETED
    assert result.row.storage_path == "general"
    assert [e["attempt"] for e in result.row.errors] == [1]
    assert result.row.id == job.id


async def test_unknown_kind_at_dispatch_fails_terminally(client: Client) -> None:
    @client.task(kind="known")
    async def known(job: Job[dict[str, int]]) -> None:
        return None

    await client.insert({"a": 1}, kind="known")
    client.registry._specs.clear()  # this worker no longer handles the kind
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.FAILED
    assert "no handler is registered for kind 'known'" in result.row.errors[-1]["error"]


async def test_run_until_idle_waits_for_a_retry_that_is_already_due(client: Client) -> None:
    """A due retry sits in deferred_jobs until a maintenance pass promotes it; the runtime
    that runs maintenance must not call itself idle in that window (a rescued attempt,
    retried at once, was left behind this way when PostgreSQL restarted mid-run)."""
    calls: list[int] = []

    @client.task(Work)
    async def flaky(job: Job[Work]) -> object:
        calls.append(job.attempt)
        return RetryAfter(0) if job.attempt == 1 else None

    job = await client.insert(Work())
    # The first pass runs at start, before the retry exists; the next is 2 s later.
    await client.run_until_idle(maintenance_interval=2.0)
    assert calls == [1, 2]
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
