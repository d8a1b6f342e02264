"""Queue pause and resume across clients, and the bounded queue summaries (``list_queues``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import Client, InvalidName, Job, JobState, QueueSummary
from storage.read import queues
from storage.read.queues import DONE_SCAN_CAP, MINUTES
from tests.storage.observe import until

Args = dict[str, Any]


async def _summary(client: Client, queue: str) -> QueueSummary:
    (found,) = [q for q in await client.list_queues() if q.queue == queue]
    return found


async def _state(client: Client, job_id: int) -> JobState:
    row = await client.get_job(job_id)
    assert row is not None
    return row.state


async def test_a_queue_paused_by_one_client_is_not_claimed_by_another_clients_runtime(
    migrated_dsn: str, schema: str
) -> None:
    async with (
        await Client.connect(migrated_dsn, schema) as operator,
        await Client.connect(migrated_dsn, schema) as worker,
    ):

        @worker.task(kind="send")
        async def send(job: Job[Args]) -> None:
            return None

        # "a_mail" sorts before "b_other": unpaused, a claim would take its lane first.
        await worker.start(["a_mail", "b_other"], poll_interval=0.01)
        await operator.pause_queue("a_mail")
        held = await operator.insert({}, kind="send", queue="a_mail")
        assert held.state is JobState.AVAILABLE  # inserts still land
        other = await operator.insert({}, kind="send", queue="b_other")
        await until(lambda: _is(operator, other.id, JobState.COMPLETED))

        # The claim that took b_other's job passed over a_mail's lane, which had work.
        assert await _state(operator, held.id) is JobState.AVAILABLE
        summary = await _summary(operator, "a_mail")
        assert summary.paused
        assert summary.paused_at is not None
        assert summary.counts[JobState.AVAILABLE] == 1
        assert summary.lag is not None
        assert not (await _summary(operator, "b_other")).paused

        await operator.resume_queue("a_mail")
        await until(lambda: _is(operator, held.id, JobState.COMPLETED))
        resumed = await _summary(operator, "a_mail")
        assert not resumed.paused
        assert resumed.paused_at is None
        assert resumed.counts[JobState.AVAILABLE] == 0
        assert resumed.lag is None
        assert resumed.completed_5m == 1


async def _is(client: Client, job_id: int, state: JobState) -> bool:
    return await _state(client, job_id) is state


async def test_pausing_lets_a_running_job_finish(client: Client) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @client.task(kind="slow", queue="q")
    async def slow(job: Job[Args]) -> None:
        started.set()
        await release.wait()

    job = await client.insert({}, kind="slow")
    await client.start(["q"], poll_interval=0.01)
    await started.wait()
    await client.pause_queue("q")
    assert (await _summary(client, "q")).counts[JobState.RUNNING] == 1
    release.set()
    await until(lambda: _is(client, job.id, JobState.COMPLETED))


async def test_run_until_idle_does_not_wait_for_a_paused_queue(client: Client) -> None:
    @client.task(kind="k", queue="q")
    async def handler(job: Job[Args]) -> None:
        return None

    await client.pause_queue("q")
    job = await client.insert({}, kind="k")
    await client.run_until_idle(["q"])
    assert await _state(client, job.id) is JobState.AVAILABLE


async def test_pause_is_idempotent_and_keeps_the_first_pause_time(client: Client) -> None:
    await client.pause_queue("q")
    first = (await _summary(client, "q")).paused_at
    await client.pause_queue("q")
    assert (await _summary(client, "q")).paused_at == first
    await client.resume_queue("q")
    await client.resume_queue("q")
    assert not (await _summary(client, "q")).paused


async def test_pause_refuses_a_queue_name_postgres_cannot_store(client: Client) -> None:
    with pytest.raises(InvalidName, match="Queue name"):
        await client.pause_queue("a\x00b")


async def test_summary_counts_live_states_failures_and_throughput(client: Client) -> None:
    @client.task(kind="ok", queue="q")
    async def ok(job: Job[Args]) -> None:
        if job.args.get("fail"):
            raise ValueError("no")

    await client.insert_many([{}] * 3, kind="ok")
    await client.insert_many([{"fail": True}] * 2, kind="ok", max_attempts=1)
    await client.run_until_idle(["q"])
    await client.insert({}, kind="ok", run_at=_later())
    summary = await _summary(client, "q")
    assert summary.completed_5m == summary.completed_1h == 3
    assert summary.failed_5m == summary.failed_1h == 2
    assert summary.completions_per_minute[-1] == 3
    assert len(summary.completions_per_minute) == MINUTES
    assert summary.counts[JobState.SCHEDULED] == 1
    assert summary.counts[JobState.AVAILABLE] == 0
    assert summary.hour_exact


async def test_summary_reads_done_entries_up_to_the_cap_and_says_so(
    client: Client, conn: asyncpg.Connection
) -> None:
    """Past the cap the hour's numbers are lower bounds: ``exact_since`` moves forward."""

    @client.task(kind="bad", queue="q")
    async def bad(job: Job[Args]) -> None:
        raise ValueError("no")

    await client.insert_many([{}] * 4, kind="bad", max_attempts=1)
    await client.run_until_idle(["q"])
    (capped,) = await queues.list_queues(conn, done_cap=3)  # the same read, 3 done rows
    assert capped.failed_1h == 3
    assert not capped.hour_exact
    assert capped.exact_since > capped.read_at - timedelta(hours=1)
    (uncapped,) = await queues.list_queues(conn, done_cap=1000)
    assert uncapped.hour_exact  # nothing stopped at a cap: exact for the whole hour
    summary = await _summary(client, "q")  # the real cap is far above 4
    assert summary.failed_1h == 4
    assert DONE_SCAN_CAP > 4


async def test_summary_leaves_out_completions_older_than_an_hour(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(kind="k", queue="q")
    async def handler(job: Job[Args]) -> None:
        if job.args.get("fail"):
            raise ValueError("no")

    await client.insert_many([{}] * 2, kind="k")
    await client.insert({"fail": True}, kind="k", max_attempts=1)
    await client.run_until_idle(["q"])
    await conn.execute(
        "UPDATE receipt_completion_batches SET finalized_at = now() - '2 h'::interval"
    )
    await conn.execute("UPDATE done_entries SET finalized_at = now() - '61 min'::interval")
    summary = await _summary(client, "q")
    assert summary.completed_1h == 0
    assert summary.failed_1h == 0


def _later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


async def test_each_count_reads_at_most_the_cap_and_says_when_it_stopped(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The summary's counts are exact up to the cap and "at least" past it: per lane the
    available jobs among its first ``cap`` sequence numbers (cancelled ones not counted), per
    queue and deferred state ``cap + 1`` index entries."""

    @client.task(kind="k")
    async def handler(job: Job[Args]) -> None:
        return None

    await client.insert_many([{}] * 5, kind="k", queue="deep")
    await client.insert_many([{}] * 2, kind="k", queue="deep", priority=1)
    first, *_ = await client.insert_many([{}] * 3, kind="k", queue="short", returning="ids")
    await client.cancel_job(first)
    await client.insert_many([{}] * 4, kind="k", queue="later", run_at=_later())

    deep, later, short = await queues.list_queues(conn, cap=3)
    assert (deep.queue, later.queue, short.queue) == ("deep", "later", "short")
    # two lanes: 3 (stopped at the cap) + 2 (exact), a lower bound
    assert deep.counts[JobState.AVAILABLE] == 5
    assert deep.capped == {JobState.AVAILABLE}
    assert short.counts[JobState.AVAILABLE] == 2  # the cancelled one is not available
    assert not short.capped
    assert later.counts[JobState.SCHEDULED] == 3
    assert later.capped == {JobState.SCHEDULED}
    assert later.lag is None

    exact = {q.queue: q for q in await client.list_queues()}  # the real cap
    assert exact["deep"].counts[JobState.AVAILABLE] == 7
    assert exact["later"].counts[JobState.SCHEDULED] == 4
    assert not any(q.capped for q in exact.values())
