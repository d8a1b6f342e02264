"""The runtime's sizing, on a real server: explicit caps are never exceeded, a claim never
holds more jobs than the free slots, the limit grows with fast handlers and shrinks when
handlers block the event loop (``storage.runtime.sizing``)."""

from __future__ import annotations

import asyncio
import time

import asyncpg
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.runtime.sizing import FLOOR
from tests.storage.observe import until_true


class Tick(BaseModel):
    n: int


async def test_an_explicit_cap_bounds_running_handlers_and_held_jobs(
    client: Client, conn: asyncpg.Connection
) -> None:
    running = most_running = most_held = 0
    release = asyncio.Event()

    @client.task(Tick)
    async def tick(job: Job[Tick]) -> None:
        nonlocal running, most_running, most_held
        running += 1
        most_running = max(most_running, running)
        runtime = client.worker.runtime
        assert runtime is not None
        most_held = max(most_held, len(runtime.inflight))
        await release.wait()
        running -= 1

    await client.insert_many([Tick(n=i) for i in range(300)])
    await client.start(concurrency=8, claim_size=5, maintenance_interval=None)
    try:
        await until_true(lambda: running == 8)  # two claims (5, then the 3 free slots) fill it
        release.set()
        await client.run_until_idle()
    finally:
        await client.shutdown()

    assert most_running == 8
    assert most_held <= 8  # claimed and unfinished: no claim took more than the free slots
    largest = await conn.fetchval("SELECT max(cardinality(job_ids)) FROM claim_batches")
    assert largest == 5
    counts = await client.counts()
    assert counts.by_state[JobState.COMPLETED] == 300


async def test_the_limit_grows_past_its_start_with_fast_handlers(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(Tick)
    async def tick(job: Job[Tick]) -> None:
        return None

    await client.insert_many([Tick(n=i) for i in range(4_000)])
    await client.run_until_idle(maintenance_interval=None)

    largest = await conn.fetchval("SELECT max(cardinality(job_ids)) FROM claim_batches")
    assert largest > FLOOR
    counts = await client.counts(cap=10_000)
    assert counts.by_state[JobState.COMPLETED] == 4_000


async def test_the_limit_shrinks_when_handlers_block_the_loop(client: Client) -> None:
    @client.task(Tick)
    async def spin(job: Job[Tick]) -> None:
        until = time.thread_time() + 0.005  # CPU without an await: the loop waits for it
        while time.thread_time() < until:
            pass

    await client.insert_many([Tick(n=i) for i in range(400)])
    await client.start(concurrency=256, maintenance_interval=None)
    try:
        await client.run_until_idle()
        runtime = client.worker.runtime
        assert runtime is not None
        assert runtime.limit < 256
    finally:
        await client.shutdown()
