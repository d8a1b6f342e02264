"""Several ``awa-tui worker`` processes on one schema.

Three workers run 6,000 jobs: each job runs exactly once (counted from the handlers' own
``runs`` rows, not from completions) and every worker exits 0 on SIGTERM. Then a worker that
was maintenance leader is killed with SIGKILL while it holds running jobs: another worker
takes the leadership over and rescues them, and every job completes once, its killed
attempts run again elsewhere (at least once).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from storage import Client
from storage.db.pool import connect_once
from storage.db.sql import MAINTENANCE_LEADER_LOCK_CLASS
from tests.workers_tasks import Count, Dawdle, tasks

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.workers_tasks:tasks"
LEADER = f"""
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE l.locktype = 'advisory' AND l.classid = {MAINTENANCE_LEADER_LOCK_CLASS}
   AND l.objid = hashtext($1)::oid AND l.objsubid = 2 AND l.granted
"""


@dataclass
class Worker:
    name: str
    process: asyncio.subprocess.Process
    stderr: list[str]
    drained: asyncio.Task[None]


def _dsn_named(dsn: str, name: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


async def _drain(process: asyncio.subprocess.Process, lines: list[str]) -> None:
    """Read the worker's stderr to the end, so a chatty worker never blocks on a full pipe."""
    assert process.stderr is not None
    async for line in process.stderr:
        lines.append(line.decode())


async def _spawn(dsn: str, schema: str, name: str, options: Sequence[str]) -> Worker:
    env = {
        **os.environ,
        "AWA_DSN": _dsn_named(dsn, name),
        "AWA_TEST_RUNS_SCHEMA": schema,
        "PYTHONPATH": str(ROOT),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "awa_tui",
        "worker",
        TARGET,
        "--schema",
        schema,
        "--max-connections",
        "4",
        *options,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    lines: list[str] = []
    return Worker(name, process, lines, asyncio.ensure_future(_drain(process, lines)))


@asynccontextmanager
async def _workers(dsn: str, schema: str, count: int, *options: str) -> AsyncIterator[list[Worker]]:
    """``count`` workers, each past its start line; all of them stopped on every way out."""
    workers: list[Worker] = []
    try:
        for i in range(count):
            workers.append(await _spawn(dsn, schema, f"w{i}-{schema}", options))
        for w in workers:
            await _until(lambda w=w: _started(w), 60)  # type: ignore[misc]
        yield workers
    finally:
        for w in workers:
            if w.process.returncode is None:
                w.process.kill()
            await w.process.wait()
            await w.drained


async def _started(worker: Worker) -> bool:
    assert worker.process.returncode is None, "".join(worker.stderr)
    return any("started tests.workers_tasks:tasks" in line for line in worker.stderr)


async def _stop(worker: Worker) -> tuple[int, str]:
    if worker.process.returncode is None:
        worker.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(worker.process.wait(), 60)
    await worker.drained
    return code, "".join(worker.stderr)


async def _until(check: Callable[[], object], seconds: float) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():  # type: ignore[misc]
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def _runs_table(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "CREATE TABLE runs (job_id bigint NOT NULL, run_lease bigint NOT NULL, pid int NOT NULL)"
    )


async def test_three_workers_run_6000_jobs_once_each_and_exit_0_on_sigterm(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    await _runs_table(conn)
    async with (
        _workers(migrated_dsn, schema, 3, "--concurrency", "32") as workers,
        await Client.connect(migrated_dsn, schema, tasks=tasks, max_connections=2) as client,
    ):
        for start in range(0, 6000, 1000):
            await client.insert_many([Count(n=n) for n in range(start, start + 1000)])

        async def all_completed() -> bool:
            done: int = await conn.fetchval(
                "SELECT count(*) FROM terminal_jobs WHERE state = 'completed'"
            )
            return done == 6000

        await _until(all_completed, 50)
        stopped = [await _stop(w) for w in workers]
    assert [code for code, _ in stopped] == [0, 0, 0], stopped
    for _, err in stopped:
        assert "stopped on SIGTERM" in err
        assert "Traceback" not in err
    runs = await conn.fetchrow(
        "SELECT count(*) AS runs, count(DISTINCT job_id) AS jobs, count(DISTINCT pid) AS pids,"
        "       max(run_lease) AS lease FROM runs"
    )
    assert runs is not None
    assert (runs["runs"], runs["jobs"], runs["lease"]) == (6000, 6000, 1)
    assert runs["pids"] == 3  # every worker took a share
    outputs = await conn.fetchval(
        "SELECT count(*) FROM terminal_jobs WHERE output IS NOT NULL AND state = 'completed'"
    )
    assert outputs == 6000  # one published completion and output per job


async def test_a_killed_leader_is_replaced_and_its_jobs_rescued(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    await _runs_table(conn)
    async with (
        connect_once(migrated_dsn) as watcher,
        _workers(
            migrated_dsn, schema, 3, "--concurrency", "8", "--rescue-after", "2", "--grace", "0"
        ) as workers,
        await Client.connect(migrated_dsn, schema, tasks=tasks, max_connections=2) as client,
    ):
        await client.insert_many([Dawdle(n=n, seconds=0.3) for n in range(240)])
        by_name = {w.name: w for w in workers}
        leaders: list[str] = []

        async def a_leader_holding_jobs() -> bool:
            held = await watcher.fetch(LEADER, schema)
            assert len(held) <= 1  # one maintenance leader at a time
            if not held:
                return False
            name = held[0]["application_name"]
            running = await conn.fetchval(
                "SELECT count(*) FROM runs r WHERE r.pid = $1 AND NOT EXISTS ("
                " SELECT 1 FROM terminal_jobs t WHERE t.job_id = r.job_id)",
                by_name[name].process.pid,
            )
            if running:
                leaders.append(name)
            return bool(running)

        await _until(a_leader_holding_jobs, 30)
        killed = by_name[leaders[-1]]
        killed.process.kill()  # SIGKILL: no shutdown, its attempts stay open
        await killed.process.wait()
        orphaned = {
            r["job_id"]
            for r in await conn.fetch(
                "SELECT job_id FROM runs WHERE pid = $1 AND NOT EXISTS (SELECT 1 FROM"
                " terminal_jobs t WHERE t.job_id = runs.job_id AND t.state = 'completed')",
                killed.process.pid,
            )
        }
        survivors = [w for w in workers if w is not killed]
        successors: set[str] = set()

        async def another_leader() -> bool:
            successors.update(r["application_name"] for r in await watcher.fetch(LEADER, schema))
            return bool(successors - {killed.name})

        await _until(another_leader, 10)  # the lease died with the session: within a pass

        async def all_completed() -> bool:
            done: int = await conn.fetchval(
                "SELECT count(*) FROM terminal_jobs WHERE state = 'completed'"
            )
            return done == 240

        await _until(all_completed, 45)
        stopped = [await _stop(w) for w in survivors]
    assert [code for code, _ in stopped] == [0, 0], stopped
    assert orphaned, "the killed worker held no running job"
    reruns = await conn.fetch(
        "SELECT job_id, max(run_lease) AS lease, array_agg(pid) AS pids FROM runs"
        " WHERE job_id = ANY($1::bigint[]) GROUP BY job_id",
        list(orphaned),
    )
    survivor_pids = {w.process.pid for w in survivors}
    for row in reruns:  # at least once: the rescued jobs ran again on a survivor
        assert row["lease"] >= 2
        assert set(row["pids"]) & survivor_pids
    completions = await conn.fetchval(
        "SELECT count(*) - count(DISTINCT job_id) FROM terminal_jobs WHERE state = 'completed'"
    )
    assert completions == 0  # each job's completion published once


async def test_a_stopped_worker_says_how_many_jobs_it_started(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    """Its stop line counts the jobs it started (it said "after starting 0 jobs" whatever it
    ran: it listened for a kind named "started" instead of the event); it registered once, by
    its target and pid, and each of its claim batches names it."""
    await _runs_table(conn)
    async with (
        _workers(migrated_dsn, schema, 1) as (worker,),
        await Client.connect(migrated_dsn, schema, tasks=tasks, max_connections=2) as client,
    ):
        await client.insert_many([Count(n=n) for n in range(7)])

        async def all_completed() -> bool:
            done: int = await conn.fetchval("SELECT count(*) FROM terminal_jobs")
            return done == 7

        await _until(all_completed, 30)
        code, err = await _stop(worker)
    assert code == 0, err
    assert "stopped on SIGTERM after starting 7 jobs; completions flushed" in err, err
    (runtime,) = await conn.fetch("SELECT id, pid, name FROM runtimes")
    assert (runtime["pid"], runtime["name"]) == (worker.process.pid, TARGET)
    claimed_by = await conn.fetch("SELECT DISTINCT runtime_id FROM claim_batches")
    assert [r["runtime_id"] for r in claimed_by] == [runtime["id"]]
