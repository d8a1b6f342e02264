"""Retry storm: every attempt fails with a ~1 KiB output. WAL and retained bytes per attempt.

ADR-048's retry-storm gate: only the latest error entry keeps its output, so what a job
retains must grow linearly with its attempts. Each run inserts N jobs (``max_attempts`` 5 or
25) whose handler records ~1 KiB of incompressible text and raises, and drives every retry by
hand until all have failed; the same storm without outputs runs in the same round. Retained:
heap, TOAST and index data after VACUUM, minus the empty schema.
"""

from __future__ import annotations

import random
import string
import time
from typing import Any

from benchmarks import _engine as engine
from benchmarks import _harness as h
from storage import Job, JobState

NAME = "retry_storm"
ATTEMPTS = (5, 25)
MAIN_FORK_BYTES = """
SELECT coalesce(sum(pg_relation_size(c.oid, 'main') + pg_indexes_size(c.oid)
                    + coalesce(pg_relation_size(nullif(c.reltoastrelid, 0), 'main')
                               + pg_indexes_size(nullif(c.reltoastrelid, 0)), 0)), 0)::bigint
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relkind = 'r'
"""
"""Heap, TOAST and index data of every table without the free-space and visibility maps
that VACUUM creates (a fixed cost per relation, not per job)."""


def make_outputs(count: int, seed: int) -> list[dict[str, Any]]:
    """~1 KiB objects of random alphanumerics (pglz cannot compress them)."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    return [
        {"step": f"sync-{i}", "detail": "".join(rng.choices(alphabet, k=990))} for i in range(count)
    ]


async def run_once(
    conn: h.Connection, dsn: str, attempts: int, outputs: list[Any] | None, jobs: int
) -> tuple[float, float, float]:
    """One checked storm in a fresh schema: (WAL, retained bytes, attempts/s), per job."""
    async with engine.queue_schema(conn, dsn, "bench_rs") as (schema, client):
        s = h.ident(schema)

        @client.task(engine.Noop)
        async def failing(job: Job[engine.Noop]) -> None:
            if outputs is not None:
                job.set_output(outputs[(job.args.i * 31 + job.attempt) % len(outputs)])
            raise RuntimeError(f"storm attempt {job.attempt}")

        await client.sync_descriptors()  # outside the window: not part of the storm
        await h.checkpoint(conn)
        empty = int(await conn.fetchval(MAIN_FORK_BYTES, schema))
        start_lsn = await h.wal_lsn(conn)
        started = time.perf_counter()
        await engine.insert_all(
            client, [engine.Noop(i) for i in range(jobs)], max_attempts=attempts
        )
        for _ in range(attempts + 1):
            await client.run_until_idle(maintenance_interval=None)
            await conn.execute(f"UPDATE {s}.deferred_jobs SET run_at = now()")
            promoted = 0
            while (pass_ := await client.run_maintenance()).promoted:
                promoted += pass_.promoted
            if not promoted:
                break
        seconds = time.perf_counter() - started
        wal = await h.wal_bytes_since(conn, start_lsn)
        for table in await h.schema_tables(conn, schema):
            await conn.execute(f"VACUUM {s}.{h.ident(table)}")
        retained = int(await conn.fetchval(MAIN_FORK_BYTES, schema)) - empty
        totals = await engine.completion_totals(conn, schema)
        closed = await conn.fetchval(f"SELECT count(*) FROM {s}.attempt_closures")
        if (totals.done_failed, totals.deferred, closed) != (jobs, 0, jobs * attempts):
            raise AssertionError(f"{attempts} attempts: {closed} closures, {totals}")
        job_id = await conn.fetchval(f"SELECT max(job_id) FROM {s}.done_entries")
        row = await client.get_job(int(job_id))
        if row is None or row.state is not JobState.FAILED or len(row.errors) != attempts:
            raise AssertionError(f"job {job_id}: not failed with {attempts} errors: {row!r}")
        kept = [i for i, e in enumerate(row.errors) if "output" in e]
        if kept != ([attempts - 1] if outputs is not None else []):
            raise AssertionError(f"job {job_id}: outputs kept on entries {kept}")
        return wal / jobs, retained / jobs, jobs * attempts / seconds


QUICK_HELP = "3 rounds of 50 jobs (default 3 rounds of 200)"
ROUNDS = True


async def amain(args: Any) -> int:
    jobs, rounds = (50 if args.quick else 200), args.rounds or 3
    outputs = make_outputs(256, args.seed)
    cases = [(a, o) for a in ATTEMPTS for o in (True, False)]
    runs: dict[tuple[int, bool], list[tuple[float, float, float]]] = {c: [] for c in cases}
    async with engine.session(args.dsn) as (dsn, conn, machine):
        await run_once(conn, dsn, 3, outputs, 50)  # warm-up, not recorded
        for round_no in range(rounds):
            for a, o in h.rotate(cases, round_no):
                runs[a, o].append(await run_once(conn, dsn, a, outputs if o else None, jobs))
                wal, kept, rate = runs[a, o][-1]
                engine.log(
                    f"round {round_no + 1}/{rounds} {a} attempts, output {o}: WAL {wal:,.0f}"
                    f" B/job, retained {kept:,.0f} B/job, {rate:,.0f} attempts/s"
                )

    def per_attempt(a: int, o: bool, metric: int) -> h.Stat:
        return h.Stat.of(r[metric] / a for r in runs[a, o])

    def outputs_share(a: int) -> h.Stat:
        kept = [[r[1] / a for r in runs[a, output]] for output in (True, False)]
        return h.Stat.paired_diff(*kept)

    rows = []
    for a, o in cases:
        label = f"max_attempts {a}, {'~1 KiB output' if o else 'no output'}"
        wal_kept = (per_attempt(a, o, 0).fmt(), per_attempt(a, o, 1).fmt())
        share = outputs_share(a).fmt() if o else "-"
        rows.append((label, *wal_kept, share, h.Stat.of(r[2] for r in runs[a, o]).fmt()))
    lo, hi = ATTEMPTS
    growth = per_attempt(hi, True, 1).median / per_attempt(lo, True, 1).median
    table = h.Table(
        f"Retry storm, {jobs} jobs per run, {rounds} rounds",
        ("case", "WAL B/attempt", "retained B/attempt", "of which outputs (paired)", "attempts/s"),
        tuple(rows),
        caption=f"Retained bytes per attempt at {hi} attempts ÷ at {lo}: {growth:.2f} "
        f"(linear keeps it near 1; copying every output would show {(hi + 1) / (lo + 1):.1f}).",
    )
    meta = {"machine": machine, "jobs": jobs, "rounds": rounds}
    data = [{"attempts": a, "output": o, "wal_retained_rate": runs[a, o]} for a, o in cases]
    return h.report(args, NAME, data, meta, title="Retry storm", tables=[table])
