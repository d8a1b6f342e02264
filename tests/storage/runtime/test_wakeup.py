"""Wake-up on insert, per-queue caps and the shutdown grace.

An idle runtime claims a newly inserted job when the insert's notice arrives, not at its next
poll; a bulk insert sends one notice per queue; ``start(queues={"q": n})`` never runs more
than ``n`` handlers of ``q`` at once; ``shutdown(grace=)`` abandons handlers that overrun.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, ConfigError, HealthState, Job, JobState, Tasks
from storage.db.pool import connect_once
from tests.storage.observe import until_true

POLL = 5.0  # seconds: long enough that a pick-up by polling would fail the bound below


class Ping(BaseModel):
    n: int


def _idle(client: Client) -> bool:
    runtime = client.worker.runtime
    return runtime is not None and runtime._quiet.is_set()


async def test_a_job_inserted_while_two_runtimes_idle_starts_before_their_poll(
    migrated_dsn: str, schema: str
) -> None:
    tasks = Tasks()
    started: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    @tasks.task(Ping, queue="wake")
    async def ping(job: Job[Ping]) -> None:
        if not started.done():
            started.set_result(time.monotonic())

    workers = [await Client.connect(migrated_dsn, schema, tasks=tasks) for _ in range(2)]
    inserter = await Client.connect(migrated_dsn, schema, tasks=tasks)
    try:
        for worker in workers:
            await worker.start(poll_interval=POLL, maintenance_interval=None)
        await until_true(lambda: all(_idle(w) for w in workers))
        inserted_at = time.monotonic()
        await inserter.insert(Ping(n=1))
        begun = await asyncio.wait_for(started, POLL * 2)
        # Behaviour, not speed: polling alone would take up to POLL seconds.
        assert begun - inserted_at < 2.0
    finally:
        for client in (*workers, inserter):
            await client.close()


async def test_a_bulk_insert_sends_one_notice_per_queue(
    client: Client, migrated_dsn: str, schema: str
) -> None:
    heard: list[str] = []

    @client.task(kind="a")
    async def a(job: Job[dict[str, int]]) -> None:
        del job

    async with connect_once(migrated_dsn) as listener:

        def collect(_c: object, _pid: int, _channel: str, payload: object) -> None:
            heard.append(str(payload))

        await listener.add_listener(f"awa_ready_{schema}", collect)
        await client.insert_many([{"n": i} for i in range(50)], kind="a", queue="alpha")
        await client.insert_many([{"n": i} for i in range(50)], kind="a", queue="beta", priority=1)
        await until_true(lambda: len(heard) >= 2)
        await listener.fetchval("SELECT 1")  # anything else sent by now has been read
        assert sorted(heard) == ["alpha", "beta"]


async def test_a_scheduled_job_promoted_by_another_client_wakes_an_idle_runtime(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    tasks = Tasks()
    done = asyncio.Event()

    @tasks.task(Ping)
    async def ping(job: Job[Ping]) -> None:
        done.set()

    async with (
        await Client.connect(migrated_dsn, schema, tasks=tasks) as worker,
        await Client.connect(migrated_dsn, schema, tasks=tasks) as leader,
    ):
        await worker.start(poll_interval=POLL, maintenance_interval=None)
        await until_true(lambda: _idle(worker))
        row = await leader.insert(Ping(n=1), run_at=datetime.now(UTC) + timedelta(hours=1))
        await conn.execute("UPDATE deferred_jobs SET run_at = now() WHERE job_id = $1", row.id)
        report = await leader.run_maintenance()
        assert report.promoted == 1
        await asyncio.wait_for(done.wait(), 2.0)


async def test_a_queue_cap_bounds_the_handlers_running_at_once(client: Client) -> None:
    running = 0
    most = 0
    release = asyncio.Event()

    @client.task(kind="send", queue="mail")
    async def send(job: Job[dict[str, int]]) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1

    await client.insert_many([{"n": i} for i in range(6)], kind="send")
    await client.start(queues={"mail": 2}, concurrency=10, maintenance_interval=None)
    try:
        await until_true(lambda: running == 2)
        release.set()
        await until_true(
            lambda: running == 0 and not (client.worker.runtime and client.worker.runtime.inflight)
        )
        await client.run_until_idle()
    finally:
        await client.shutdown()
    assert most == 2
    page = await client.list_jobs(state=JobState.COMPLETED)
    assert len(page) == 6


async def test_shutdown_grace_abandons_a_handler_that_overruns(client: Client) -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    @client.task(kind="stuck")
    async def stuck(job: Job[dict[str, int]]) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    row = await client.insert({"n": 1}, kind="stuck")
    await client.start(maintenance_interval=None)
    await asyncio.wait_for(entered.wait(), 10)
    await client.shutdown(grace=0.2)
    assert cancelled.is_set()
    job = await client.get_job(row.id)
    assert job is not None
    assert job.state is JobState.RETRYABLE  # given back at once (test_shutdown_release)


@pytest.mark.parametrize("cap", [0, -1, 2.5, True])
async def test_a_queue_cap_must_be_a_whole_number_of_at_least_one(
    client: Client, cap: object
) -> None:
    with pytest.raises(ConfigError, match="must be a whole number of at least 1"):
        await client.start(queues={"mail": cap})  # type: ignore[dict-item]
    assert client.health.state is HealthState.STOPPED
