"""Chaos: every backend of a running runtime is killed ten times during a 3,000-job run. Every
job still completes exactly once with its own output, and the runtime reports itself running
again afterwards (its loops are supervised; none dies on the driver's errors). Each client
closes under a watchdog: a close that does not return fails the test instead of hanging it
(``scripts/chaos_loop.py`` runs this test in a loop and counts hangs).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.db.pool import connect_once
from storage.ops.maintenance import MaintenanceSettings
from storage.values.health import HealthState

TOTAL = 3000
KILLS = 10
CLOSE_BOUND = 10.0
"""``Client.close(timeout=...)`` here: graceful, then every connection terminated."""
WATCHDOG = CLOSE_BOUND + 20.0
"""How long a close may take before the test calls it a hang (its bound, plus slack for a
loaded host)."""


class Work(BaseModel):
    n: int


def _with_application_name(dsn: str, name: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


async def _kill_all(killer: asyncpg.Connection, application_name: str) -> int:
    killed: int = await killer.fetchval(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE application_name = $1",
        application_name,
    )
    return killed


@asynccontextmanager
async def _watched(
    dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Client]:
    """A client whose close, however the block ends, must return within ``WATCHDOG``, and
    finish gracefully: a close that had to use its bound (terminate what never came back) is
    the hang the bound now hides, and fails the test as one."""
    client = await Client.connect(dsn, schema)
    try:
        yield client
    finally:
        try:
            async with asyncio.timeout(WATCHDOG):
                await client.close(timeout=CLOSE_BOUND)
        except TimeoutError:
            pytest.fail(
                f"HANG: Client.close(timeout={CLOSE_BOUND:g}) had not returned after {WATCHDOG:g}s"
            )
        assert client.pool.is_closing(), "close() returned with the pool still open"
        forced = [r.getMessage() for r in caplog.records if r.getMessage().startswith("close:")]
        assert not forced, f"HANG (bounded): close needed its bound: {forced}"


async def _until(predicate: object, deadline: float) -> None:
    """A bounded poll of a real condition (the health the runtime reports)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not predicate():  # type: ignore[operator]
        assert loop.time() < end, "condition not reached before the deadline"
        await asyncio.sleep(0.05)


async def test_runtime_survives_ten_kills_of_all_its_backends(
    migrated_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    app_name = f"awa-chaos-{schema}"
    progress = 0
    reached = asyncio.Event()
    target = 0

    async with _watched(_with_application_name(migrated_dsn, app_name), schema, caplog) as client:

        @client.task(Work)
        async def work(job: Job[Work]) -> None:
            nonlocal progress
            job.set_output({"n": job.args.n, "twice": 2 * job.args.n})
            progress += 1
            if progress >= target:
                reached.set()

        await client.insert_many([Work(n=i) for i in range(TOTAL)])
        async with connect_once(migrated_dsn) as killer:
            await client.start(
                concurrency=64,
                heartbeat_interval=0.5,
                maintenance_interval=0.5,
                maintenance=MaintenanceSettings(heartbeat_stale_seconds=3),
            )
            kills = []
            for i in range(1, KILLS + 1):
                target = i * TOTAL // (KILLS + 2)
                reached.clear()
                if progress < target:
                    await asyncio.wait_for(reached.wait(), 60)
                kills.append(await _kill_all(killer, app_name))
            assert all(k >= 1 for k in kills), kills
        # A hang guard, not a speed assertion: a dead loop would wait forever.
        await asyncio.wait_for(client.run_until_idle(), 60)
        await _until(lambda: client.health.state is HealthState.RUNNING, 30)
        await client.shutdown()

    async with _watched(migrated_dsn, schema, caplog) as reader:
        counts = await reader.counts(cap=TOTAL)
        assert counts.by_state.get(JobState.COMPLETED) == TOTAL, counts
        async with reader.pool.acquire() as pooled:
            rows = await pooled.fetch("SELECT job_id, args, output FROM terminal_jobs")
    assert len(rows) == TOTAL  # one terminal row per job: none completed twice
    assert len({r["job_id"] for r in rows}) == TOTAL
    for r in rows:
        n = r["args"]["n"]
        assert r["output"] == f'{{"n":{n},"twice":{2 * n}}}', r["job_id"]
