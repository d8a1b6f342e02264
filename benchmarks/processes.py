"""Scaling out on one server: ``awa-tui worker --processes P`` at the defaults, and how long its
claims wait for the lane lock.

Per run: N no-op jobs in a fresh schema with its queue paused, the worker command started
with P processes (1, 2, 4, 8 by default, each sized by the engine), the queue resumed, and the
run timed to its last completion (``benchmarks.lifecycle.in_processes``). Meanwhile a second
connection samples pg_stat_activity every ``SAMPLE_MS``: the backends waiting on a heavyweight
lock in a claim's statement (``CLAIM_STATEMENTS``: its lane's ``FOR UPDATE``) and in any other
statement, and the active ones. The mean number of lane waiters times the run's seconds is
the time spent waiting for the lane (Little's law); over the claims made (``claim_id_seq``)
it is the lane wait per claim. Also the run's jobs/s, server CPU and WAL per job. The figures
say where the one lane of one queue serialises claimers, not how fast a bigger machine would
be.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg

from benchmarks import _engine as engine
from benchmarks import _harness as h
from benchmarks._engine import CLAIM_STATEMENTS
from benchmarks.lifecycle import TARGET, in_processes

NAME = "processes"
SAMPLE_MS = 10
SAMPLE = """
SELECT count(*) FILTER (WHERE wait_event_type = 'Lock' AND query = ANY($1::text[])) AS lane_waiting,
       count(*) FILTER (WHERE wait_event_type = 'Lock' AND query <> ALL($1::text[]))
           AS other_lock_waiting,
       count(*) FILTER (WHERE wait_event_type IN ('LWLock', 'IO')) AS lwlock_io_waiting,
       count(*) AS active
  FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND state = 'active' AND pid <> pg_backend_pid()
   AND datname = current_database()
"""


@dataclass(frozen=True, slots=True)
class Run:
    processes: int
    round: int
    jobs: int
    run_s: float
    claims: int
    samples: int
    lane_waiting: float  # mean backends waiting for the lane lock, over the samples
    other_lock_waiting: float
    lwlock_io_waiting: float
    active: float
    server_cpu_s: float
    wal: int

    @property
    def lane_wait_ms_per_claim(self) -> float:
        return 1000 * self.lane_waiting * self.run_s / max(1, self.claims)


async def sample(dsn: str, stop: asyncio.Event) -> list[tuple[int, ...]]:
    """pg_stat_activity's waiters every ``SAMPLE_MS`` until ``stop``."""
    conn: h.Connection = await asyncpg.connect(dsn)
    found: list[tuple[int, ...]] = []
    try:
        while not stop.is_set():
            row = await conn.fetchrow(SAMPLE, list(CLAIM_STATEMENTS))
            assert row is not None
            found.append(tuple(int(v) for v in row.values()))
            await asyncio.sleep(SAMPLE_MS / 1000)
    finally:
        await conn.close()
    return found


async def run_once(conn: h.Connection, dsn: str, processes: int, jobs: int, round_no: int) -> Run:
    async with engine.queue_schema(conn, dsn, "bench_procs") as (schema, client):
        engine.register_handler(client, None)  # the kind is known (the workers run it)
        await client.pause_queue("default")
        await engine.insert_all(client, [engine.Noop(i) for i in range(jobs)])
        seq = f"SELECT last_value FROM {h.ident(schema)}.claim_id_seq"
        claims_before = int(await conn.fetchval(seq))
        await h.checkpoint(conn)
        server = await h.ServerCpu.find(conn)
        server_started, lsn = server.seconds() if server else 0.0, await h.wal_lsn(conn)
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample(dsn, stop))
        try:
            argv = ["--processes", str(processes)]
            run_s, _ = await in_processes(client, conn, dsn, argv, schema, jobs)
        finally:
            stop.set()
            found = await sampler
        server_cpu = server.seconds() - server_started if server else 0.0
        wal = await h.wal_bytes_since(conn, lsn)
        claims = int(await conn.fetchval(seq)) - claims_before
    lane, other, lwlock_io, active = (sum(c) / max(1, len(found)) for c in zip(*found, strict=True))
    means = (lane, other, lwlock_io, active)
    return Run(processes, round_no, jobs, run_s, claims, len(found), *means, server_cpu, wal)


QUICK_HELP = "1 round of 5,000 jobs at 1, 2, 4 and 8 processes (default 3 rounds of 20,000)"
ROUNDS = True
OPTIONS = {
    "--jobs": {"type": int, "help": "jobs per run"},
    "--processes": {"type": int, "action": "append", "help": "worker processes, repeatable"},
}


async def amain(args: Any) -> int:
    rounds = args.rounds or (1 if args.quick else 3)
    jobs = args.jobs or (5_000 if args.quick else 20_000)
    counts = args.processes or [1, 2, 4, 8]
    runs: list[Run] = []
    async with engine.session(args.dsn, max_connections=12 * max(counts) + 30) as (
        dsn,
        conn,
        machine,
    ):
        await run_once(conn, dsn, 1, 1_000, -1)  # warm-up, not recorded
        for round_no in range(rounds):
            for p in h.rotate(counts, round_no):
                runs.append(run := await run_once(conn, dsn, p, jobs, round_no))
                engine.log(
                    f"round {round_no + 1}/{rounds} {p} processes: {jobs / run.run_s:,.0f} jobs/s,"
                    f" {run.lane_wait_ms_per_claim:.2f} ms lane wait per claim, load "
                    f"{os.getloadavg()[0]:.1f}"
                )
    first = {r.round: r for r in runs if r.processes == counts[0]}
    rows = []
    for p in counts:
        mine = [r for r in runs if r.processes == p]
        rate = [r.jobs / r.run_s for r in mine]
        base = [first[r.round].jobs / first[r.round].run_s for r in mine]
        cells = [
            (h.Stat.of(rate), ",.0f"),
            (h.Stat.paired_ratio(rate, base), ".2f"),
            (h.Stat.of(r.jobs / max(1, r.claims) for r in mine), ",.0f"),
            (h.Stat.of(r.lane_waiting for r in mine), ".2f"),
            (h.Stat.of(r.lane_wait_ms_per_claim for r in mine), ".2f"),
            (h.Stat.of(r.other_lock_waiting for r in mine), ".2f"),
            (h.Stat.of(r.lwlock_io_waiting for r in mine), ".2f"),
            (h.Stat.of(r.active for r in mine), ".1f"),
            (h.Stat.of(1e6 * r.server_cpu_s / r.jobs for r in mine), ",.0f"),
            (h.Stat.of(r.wal / r.jobs for r in mine), ",.0f"),
        ]
        rows.append((str(p), *(stat.fmt(spec) for stat, spec in cells)))
    table = h.Table(
        f"awa-tui worker --processes P at the defaults: {jobs:,} no-op jobs, {rounds} rounds",
        h.columns(
            f"processes | run jobs/s | x {counts[0]}, paired | jobs per claim"
            " | lane waiters (mean) | lane wait ms per claim | other lock waiters"
            " | LWLock+IO waiters | active backends | run: server CPU µs/job | run: WAL B/job"
        ),
        tuple(rows),
        caption=f"pg_stat_activity sampled every {SAMPLE_MS} ms during the run phase; lane wait "
        "per claim = mean lane waiters x run seconds / claims.",
    )
    meta = {"machine": machine, "rounds": rounds, "jobs": jobs, "worker": TARGET}
    meta["load_average_end"] = os.getloadavg()
    return h.report(args, NAME, [asdict(r) for r in runs], meta, title="Processes", tables=[table])
