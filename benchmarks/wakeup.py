"""Insert to handler start while the runtimes idle with a long poll interval.

Two runtimes (``poll_interval=5``, as a quiet production worker might run) wait on one schema;
a third client inserts one job at a time and the handler notes when it starts. Only the ready
notice can start a job sooner than the poll, so the median measures the wake-up path
(target: at most 20 ms). The ``insert()`` call itself is timed too: it carries the NOTIFY.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks._engine import Noop, queue_schema, session
from benchmarks._harness import Table, latency_stats, report, stat_cells
from storage import Client, Job, Tasks

NAME = "wakeup"
POLL = 5.0
TARGET_MS = 20.0


async def idle(workers: list[Client]) -> None:
    """Until every runtime's last claim came back empty with nothing running (bounded)."""
    deadline = time.monotonic() + 30
    while not all(
        w.worker.runtime is not None and w.worker.runtime._quiet.is_set() for w in workers
    ):
        if time.monotonic() > deadline:
            raise AssertionError("the runtimes did not go idle")
        await asyncio.sleep(0.005)


async def measure(dsn: str, schema: str, samples: int) -> tuple[list[float], list[float]]:
    tasks = Tasks()
    started: asyncio.Future[float] | None = None

    @tasks.task(Noop)
    async def note(job: Job[Noop]) -> None:
        if started is not None and not started.done():
            started.set_result(time.perf_counter())

    workers = [await Client.connect(dsn, schema, tasks=tasks) for _ in range(2)]
    inserter = await Client.connect(dsn, schema, tasks=tasks)
    wake_ms: list[float] = []
    insert_ms: list[float] = []
    try:
        for worker in workers:
            await worker.start(poll_interval=POLL, maintenance_interval=None)
        for i in range(samples + 5):  # the first 5 warm connections and statements
            await idle(workers)
            started = asyncio.get_running_loop().create_future()
            t0 = time.perf_counter()
            await inserter.insert(Noop(i))
            t1 = time.perf_counter()
            begun = await asyncio.wait_for(started, POLL * 2)
            if i >= 5:
                insert_ms.append((t1 - t0) * 1000)
                wake_ms.append((begun - t0) * 1000)
    finally:
        for client in (*workers, inserter):
            await client.close()
    return wake_ms, insert_ms


async def amain(args: Any) -> int:
    samples = args.samples or (60 if args.quick else 300)
    async with (
        session(args.dsn) as (dsn, conn, machine),
        queue_schema(conn, dsn, "bench_wake") as (schema, _),
    ):
        wake_ms, insert_ms = await measure(dsn, schema, samples)
    keys = ("median", "p95", "p99", "max")
    rows = [
        (label, *stat_cells(latency_stats(values), keys, ".1f"))
        for label, values in (("insert to handler start", wake_ms), ("insert() call", insert_ms))
    ]
    table = Table(
        f"Wake-up latency, ms ({samples} jobs, 2 idle runtimes, poll_interval={POLL:g} s)",
        ("measure", *keys),
        tuple(rows),
        caption=f"target: insert to handler start median <= {TARGET_MS:g} ms",
    )
    data = [{"wake_ms": wake_ms, "insert_ms": insert_ms}]
    meta = {"machine": machine, "samples": samples}
    report(args, NAME, data, meta, title="Wake-up on insert", tables=(table,))
    return 0 if latency_stats(wake_ms)["median"] <= TARGET_MS else 1


QUICK_HELP = "60 jobs (default 300)"
OPTIONS = {"--samples": {"type": int, "help": "jobs to time"}}
