"""A fleet of idle runtimes on one server: PostgreSQL's CPU and the claim queries they cost.

50 runtimes (``--runtimes``) in this process, each its own client on one queue of one schema,
started at the defaults (maintenance on: one of them leads the passes, the others try for the
leader's lock once in five seconds, ``storage.ops.leadership``) with nothing to do. Measured
over a window after a warm-up: the CPU of every PostgreSQL process (/proc) as a percentage of
one core, this process's CPU likewise, claim queries per second (pg_stat_statements when the
server has it loaded, else counted by a query logger on each runtime's pool) and every
statement the runtimes sent. Beside it: the server with no runtime (its own background work),
the fleet without maintenance (what the passes cost) and at the old 50 ms ``poll_interval``,
interleaved per round. Each client's pool is capped at ``POOL`` connections so the logger sits
on all of them (an idle runtime uses at most two at once, the leader three: its lock's
connection too); the embedded server is restarted allowing the connections (issue #28's
target: at most 5% of a core, at most 1 claim a second per runtime).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks import _harness as h
from benchmarks._engine import (
    CLAIM_STATEMENTS,
    Noop,
    drop_queue_schema,
    log,
    new_queue_schema,
    session,
)
from benchmarks.wakeup import OLD_POLL, claims_counted, statements_available
from storage import Client, Job, Tasks

NAME = "idle_fleet"
POOL = 3
MAX_CPU_PERCENT = 5.0
MAX_CLAIMS_PER_RUNTIME = 1.0
DEFAULTS = "defaults"
VARIANTS: dict[str, dict[str, Any] | None] = {
    "server alone": None,
    DEFAULTS: {},
    "defaults but no maintenance": {"maintenance_interval": None},
    f"poll_interval {OLD_POLL:g} s (the old default)": {"poll_interval": OLD_POLL},
}
"""``Client.start`` options per variant; None starts no runtime."""


@dataclass(frozen=True, slots=True)
class Window:
    variant: str
    round: int
    seconds: float
    server_cpu_s: float
    client_cpu_s: float
    claims: int
    statements: int

    def per_s(self, value: float) -> float:
        return value / self.seconds


class Counter:
    """Claim queries and all statements seen by the query loggers of a fleet's pools."""

    def __init__(self) -> None:
        self.claims = self.statements = 0

    def __call__(self, record: Any) -> None:
        self.statements += 1
        self.claims += record.query in CLAIM_STATEMENTS


@contextlib.asynccontextmanager
async def fleet(
    dsn: str, schema: str, size: int, options: dict[str, Any] | None, counter: Counter
) -> AsyncIterator[None]:
    """``size`` runtimes started with ``options`` (none when None), every pool connection
    logged."""
    tasks = Tasks()

    @tasks.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        return None

    clients: list[Client] = []
    try:
        for _ in range(0 if options is None else size):
            assert options is not None
            client = await Client.connect(dsn, schema, tasks=tasks, max_connections=POOL)
            clients.append(client)
            held = [await client.pool.acquire() for _ in range(POOL)]
            for conn in held:
                conn.add_query_logger(counter)
                await client.pool.release(conn)
            await client.start(**options)
        yield
    finally:
        await asyncio.gather(*(client.close() for client in clients))


async def measure(
    dsn: str, conn: h.Connection, variant: str, size: int, seconds: float, round_no: int
) -> Window:
    """One variant's window on a fresh schema, after a 2 s warm-up past the starts."""
    schema, counter = await new_queue_schema(conn, "bench_idle"), Counter()
    server = await h.ServerCpu.find(conn)
    from_server = await statements_available(conn)
    try:
        async with fleet(dsn, schema, size, VARIANTS[variant], counter):
            await asyncio.sleep(2.0)
            if from_server:
                await conn.execute("SELECT pg_stat_statements_reset()")
            claims, statements = counter.claims, counter.statements
            server_started = server.seconds() if server else 0.0
            cpu_started, started = time.process_time(), time.perf_counter()
            await asyncio.sleep(seconds)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            server_cpu = server.seconds() - server_started if server else 0.0
            claims, statements = counter.claims - claims, counter.statements - statements
            if from_server:
                claims = await claims_counted(conn)
    finally:
        await drop_queue_schema(conn, schema)
    window = Window(variant, round_no, elapsed, server_cpu, cpu, int(claims), statements)
    rate = window.per_s(window.claims)
    log(
        f"round {round_no + 1} {variant}: server {100 * window.per_s(server_cpu):.1f}% of a core, "
        f"{rate:.1f} claims/s"
    )
    return window


QUICK_HELP = "1 round of 4 s per variant (default 2 rounds of 10 s)"
ROUNDS = True
OPTIONS = {
    "--runtimes": {"type": int, "default": 50, "help": "idle runtimes in the fleet"},
    "--seconds": {"type": float, "help": "measured seconds per variant"},
}


async def amain(args: Any) -> int:
    rounds = args.rounds or (1 if args.quick else 2)
    seconds = args.seconds or (4.0 if args.quick else 10.0)
    size = args.runtimes
    windows: list[Window] = []
    async with session(args.dsn, max_connections=size * (POOL + 1) + 20) as (dsn, conn, machine):
        source = "pg_stat_statements" if await statements_available(conn) else "query loggers"
        for round_no in range(rounds):
            for variant in h.rotate(list(VARIANTS), round_no):
                windows.append(await measure(dsn, conn, variant, size, seconds, round_no))
    rows = []
    for variant, options in VARIANTS.items():
        mine = [w for w in windows if w.variant == variant]
        n = size if options is not None else 0
        cells = [
            h.Stat.of(100 * w.per_s(w.server_cpu_s) for w in mine).fmt(".1f"),
            h.Stat.of(100 * w.per_s(w.client_cpu_s) for w in mine).fmt(".1f"),
            h.Stat.of(w.per_s(w.claims) for w in mine).fmt(".1f"),
            h.Stat.of(w.per_s(w.claims) / n for w in mine).fmt(".2f") if n else "-",
            h.Stat.of(w.per_s(w.statements) for w in mine).fmt(".1f"),
        ]
        rows.append((variant, str(n), *cells))
    table = h.Table(
        f"{size} idle runtimes on one server ({seconds:g} s windows, {rounds} rounds)",
        h.columns(
            "variant | runtimes | PostgreSQL CPU % of a core | client CPU % of a core"
            " | claims/s | claims/s per runtime | statements/s (pool loggers)"
        ),
        tuple(rows),
        caption=f"claims counted by {source}; {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f} at the end. Targets at the default: "
        f"<= {MAX_CPU_PERCENT:g}% of a core, <= {MAX_CLAIMS_PER_RUNTIME:g} claim/s per runtime.",
    )
    meta = {"machine": machine, "rounds": rounds, "seconds": seconds, "runtimes": size}
    meta["pool_per_runtime"] = POOL
    h.report(args, NAME, [asdict(w) for w in windows], meta, title="Idle fleet", tables=[table])
    default = [w for w in windows if w.variant == DEFAULTS]
    cpu = h.Stat.of(100 * w.per_s(w.server_cpu_s) for w in default).median
    claims = h.Stat.of(w.per_s(w.claims) / size for w in default).median
    return 0 if cpu <= MAX_CPU_PERCENT and claims <= MAX_CLAIMS_PER_RUNTIME else 1
