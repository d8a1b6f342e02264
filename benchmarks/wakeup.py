"""Ready to handler start for every way a job becomes ready, and the claims an idle runtime makes.

Wake-up: a runtime idles at ``poll_interval=5`` on a fresh schema per path; another client
readies one job at a time by that path (``benchmarks._wake_paths.PATHS``: insert, keyed
insert, COPY, promotions, a periodic tick, operator and DLQ retries, ``retry_external``,
resume) and the handler notes when it starts. Only the ready notice can start a job sooner
than the poll, so each median measures that path's wake-up (target: at most 20 ms). Timed from
the start of the path's last call (which carries the NOTIFY) to the handler's start.

Idle cost: a runtime with nothing to do, at the default ``poll_interval`` and at the old 50 ms,
for a few seconds each: claim queries per second, from pg_stat_statements when the server has
it loaded, else counted on the runtime's pool with a query logger.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from benchmarks._engine import (
    CLAIM_STATEMENTS,
    Noop,
    drop_queue_schema,
    log,
    new_queue_schema,
    session,
)
from benchmarks._harness import Connection, Table, latency_stats, report, stat_cells
from benchmarks._wake_paths import PATHS, POLL, Wake, bench, wake_seconds
from storage import Client, Job, Tasks

NAME = "wakeup"
TARGET_MS = 20.0
WARM = 2  # samples per path not kept: they prepare the statements
POOL_SIZE = 10  # Client.connect's default pool: every connection gets the logger
OLD_POLL = 0.05


async def wake_ms(dsn: str, conn: Connection, samples: int) -> dict[str, list[Wake]]:
    found: dict[str, list[Wake]] = {}
    for path, setup in PATHS.items():
        schema = await new_queue_schema(conn, "bench_wake")
        try:
            async with bench(dsn, schema) as b:
                times = [await wake_seconds(b, setup, n, POLL * 2) for n in range(WARM + samples)]
        finally:
            await drop_queue_schema(conn, schema)
        found[path] = times[WARM:]
        log(f"{path}: median {_median_ms(found[path], 'seconds'):.1f} ms")
    return found


def _median_ms(wakes: list[Wake], what: str) -> float:
    return latency_stats([getattr(w, what) * 1000 for w in wakes])["median"]


async def statements_available(conn: Connection) -> bool:
    try:
        await conn.fetchval("SELECT count(*) FROM pg_stat_statements")
    except asyncpg.PostgresError:
        return False
    return True


async def claims_counted(conn: Connection) -> int:
    """Claims pg_stat_statements counted since its last reset, on either path of the claim."""
    return int(
        await conn.fetchval(
            "SELECT COALESCE(sum(calls), 0) FROM pg_stat_statements"
            " WHERE btrim(query, E'\\n ') = ANY($1::text[])",
            [q.strip("\n ") for q in CLAIM_STATEMENTS],
        )
    )


async def idle_claims_per_second(
    dsn: str, conn: Connection, poll_interval: float | None, seconds: float, from_server: bool
) -> float:
    """Claim queries a second of one idle runtime (``poll_interval`` None: the default)."""
    schema = await new_queue_schema(conn, "bench_idle")
    tasks = Tasks()

    @tasks.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        return None

    claims = 0

    def count(record: Any) -> None:
        nonlocal claims
        claims += record.query in CLAIM_STATEMENTS

    try:
        async with await Client.connect(dsn, schema, tasks=tasks) as worker:
            held = [await worker.pool.acquire() for _ in range(POOL_SIZE)]
            for c in held:
                c.add_query_logger(count)
            for c in held:
                await worker.pool.release(c)
            if poll_interval is None:
                await worker.start()
            else:
                await worker.start(poll_interval=poll_interval)
            await asyncio.sleep(1.0)  # past the start's first claims
            if from_server:
                await conn.execute("SELECT pg_stat_statements_reset()")
            claims, began = 0, time.perf_counter()
            await asyncio.sleep(seconds)
            elapsed = time.perf_counter() - began
            if from_server:
                claims = await claims_counted(conn)
            await worker.shutdown()
    finally:
        await drop_queue_schema(conn, schema)
    return claims / elapsed


async def amain(args: Any) -> int:
    samples = args.samples or (5 if args.quick else 30)
    idle_seconds = 3.0 if args.quick else 10.0
    async with session(args.dsn) as (dsn, conn, machine):
        found = await wake_ms(dsn, conn, samples)
        from_server = await statements_available(conn)
        idle = {
            label: await idle_claims_per_second(dsn, conn, poll, idle_seconds, from_server)
            for label, poll in (("default", None), (f"{OLD_POLL:g} s (the old default)", OLD_POLL))
        }
    keys = ("median", "p95", "max")
    rows = [
        (
            path,
            *stat_cells(latency_stats([w.seconds * 1000 for w in wakes]), keys, ".1f"),
            f"{_median_ms(wakes, 'call_seconds'):.1f}",
        )
        for path, wakes in found.items()
    ]
    wake = Table(
        f"Ready to handler start, ms ({samples} jobs per path, an idle runtime, "
        f"poll_interval={POLL:g} s), from the start of the path's call",
        ("path", *keys, "the call itself, median"),
        tuple(rows),
        caption=f"target: median <= {TARGET_MS:g} ms on every path",
    )
    source = "pg_stat_statements" if from_server else "a query logger on the runtime's pool"
    cost = Table(
        f"Claim queries per second of an idle runtime ({idle_seconds:g} s, counted by {source})",
        ("poll_interval", "claims/s"),
        tuple((label, f"{rate:.2f}") for label, rate in idle.items()),
        caption="target: at most 1 at the default",
    )
    data = [
        {
            "path": path,
            "wake_ms": [w.seconds * 1000 for w in wakes],
            "call_ms": [w.call_seconds * 1000 for w in wakes],
        }
        for path, wakes in found.items()
    ]
    meta = {"machine": machine, "samples": samples, "idle_seconds": idle_seconds}
    report(
        args, NAME, data, meta, title="Wake-up per path", tables=(wake, cost), extra={"idle": idle}
    )
    slow = [path for path, wakes in found.items() if _median_ms(wakes, "seconds") > TARGET_MS]
    return 1 if slow or idle["default"] > 1.0 else 0


QUICK_HELP = "5 jobs per path, 3 s idle (default 30 jobs, 10 s)"
OPTIONS = {"--samples": {"type": int, "help": "jobs to time per path"}}
