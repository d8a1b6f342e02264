"""Retry storm: every attempt fails with a ~1 KiB output. WAL and retained bytes per attempt.

Run as ``python -m benchmarks.retry_storm [--quick] [--dsn DSN] [--out DIR]``.

ADR-048 *Benchmark gates*: "Retry-storm WAL: every attempt fails with an output". A failed
attempt's output lives in its error entry inside the ready row's jsonb payload, and only
the latest entry that recorded an output keeps it. Each retry writes a new ready row that
carries the whole payload, so what a job retains must grow linearly with its attempts: a
store that kept every attempt's output in every later row would grow with their square.

Each run installs a fresh schema, inserts N jobs with ``max_attempts`` 5 or 25 whose handler
records a ~1 KiB output (random text, so it does not compress) and raises, then drives
every retry by hand: ``run_until_idle`` runs all runnable attempts, ``UPDATE deferred_jobs
SET run_at = now()`` makes the retries due, and ``client.run_maintenance()`` promotes them;
repeat until every job has failed for good. The same storm without outputs runs in the
same round, so the outputs' own cost is a paired difference.

Measured per run: WAL (``pg_current_wal_insert_lsn()`` diff over the whole storm, inserts
and promotions included), retained bytes (``pg_total_relation_size`` of every table of the
schema, partitions and TOAST included, minus the empty schema), and the live payload bytes
(``pg_column_size(payload)`` summed over the rows that hold payloads).
"""

from __future__ import annotations

import asyncio
import random
import string
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from benchmarks._engine import (
    CallTimer,
    Noop,
    completion_totals,
    drop_queue_schema,
    insert_all,
    log,
    new_queue_schema,
    prepare,
)
from benchmarks._harness import (
    Connection,
    Stat,
    Table,
    base_parser,
    checkpoint,
    command_line,
    embedded_or_dsn,
    ident,
    machine_info,
    print_table,
    schema_tables,
    table_sizes,
    wal_bytes_since,
    wal_lsn,
    write_results,
)
from storage import Client, Job, JobState

NAME = "retry_storm"
OUTPUT_BYTES = 1_024
TIMED = (
    "transitions.fail",
    "finalize.lock_claims",
    "finalize.lock_attempt",
    "finalize.close_if_open",
    "finalize.write_deferred",
    "finalize.write_done",
)
"""Engine calls timed during the storm (where a failed attempt's time goes)."""


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    jobs: int
    attempts: tuple[int, ...]


FULL = Plan(rounds=3, jobs=200, attempts=(5, 25))
QUICK = Plan(rounds=3, jobs=50, attempts=(5, 25))


@dataclass(frozen=True, slots=True)
class Case:
    attempts: int
    output: bool

    @property
    def key(self) -> str:
        return f"a{self.attempts}_{'output' if self.output else 'nooutput'}"

    @property
    def label(self) -> str:
        what = "~1 KiB output" if self.output else "no output"
        return f"max_attempts {self.attempts}, {what}"


def make_outputs(count: int, seed: int) -> list[dict[str, Any]]:
    """~1 KiB objects of random alphanumerics (pglz cannot compress them)."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    out = []
    for i in range(count):
        head: dict[str, Any] = {"step": f"sync-{i}", "rows_seen": rng.randrange(10**6)}
        head["detail"] = ""
        room = OUTPUT_BYTES - len(orjson.dumps(head))
        head["detail"] = "".join(rng.choices(alphabet, k=room))
        out.append(head)
    return out


@dataclass(slots=True)
class RunSample:
    case: Case
    round: int
    jobs: int
    attempts_run: int
    passes: int
    seconds: float
    wal: int
    retained: int
    retained_vacuumed: int
    retained_by_table: dict[str, int]
    payload_bytes: int
    timer: dict[str, dict[str, float]]

    @property
    def wal_per_job(self) -> float:
        return self.wal / self.jobs

    @property
    def retained_per_job(self) -> float:
        return self.retained / self.jobs

    @property
    def payload_per_job(self) -> float:
        return self.payload_bytes / self.jobs

    @property
    def vacuumed_per_job(self) -> float:
        return self.retained_vacuumed / self.jobs

    def as_dict(self) -> dict[str, object]:
        return {
            "case": self.case.key,
            "round": self.round,
            "jobs": self.jobs,
            "attempts_run": self.attempts_run,
            "passes": self.passes,
            "seconds": self.seconds,
            "attempts_per_s": self.attempts_run / self.seconds,
            "wal_bytes": self.wal,
            "retained_bytes": self.retained,
            "retained_bytes_after_vacuum": self.retained_vacuumed,
            "retained_by_table": self.retained_by_table,
            "payload_bytes": self.payload_bytes,
            "call_timer": self.timer,
        }


MAIN_FORK_BYTES = """
SELECT coalesce(sum(pg_relation_size(c.oid, 'main') + pg_indexes_size(c.oid)
                    + coalesce(pg_relation_size(nullif(c.reltoastrelid, 0), 'main')
                               + pg_indexes_size(nullif(c.reltoastrelid, 0)), 0)), 0)::bigint
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relkind = 'r'
"""
"""Heap, TOAST and index data of every table (partitions included), without the free-space
and visibility maps that VACUUM creates (a fixed cost per relation, not per job)."""


async def main_fork_bytes(conn: Connection, schema: str) -> int:
    return int(await conn.fetchval(MAIN_FORK_BYTES, schema))


async def payload_bytes(conn: Connection, schema: str) -> int:
    s = ident(schema)
    value = await conn.fetchval(
        f"""SELECT (SELECT coalesce(sum(pg_column_size(payload)), 0) FROM {s}.ready_entries)
                 + (SELECT coalesce(sum(pg_column_size(payload)), 0) FROM {s}.deferred_jobs)
                 + (SELECT coalesce(sum(pg_column_size(payload)), 0) FROM {s}.done_entries)
                 + (SELECT coalesce(sum(pg_column_size(payload)), 0) FROM {s}.dlq_entries)"""
    )
    return int(value)


async def run_once(
    conn: Connection,
    dsn: str,
    case: Case,
    jobs: int,
    outputs: list[dict[str, Any]],
    round_no: int,
) -> RunSample:
    schema = await new_queue_schema(conn, "bench_rs")
    s = ident(schema)
    client = await Client.connect(dsn, schema)
    try:
        record = case.output

        @client.task(Noop)
        async def failing(job: Job[Noop]) -> None:
            if record:
                job.set_output(outputs[(job.args.i * 31 + job.attempt) % len(outputs)])
            raise RuntimeError(f"storm attempt {job.attempt}")

        await client.sync_descriptors()  # outside the window: descriptor rows are not the storm
        tables = await schema_tables(conn, schema)
        await checkpoint(conn)
        empty = await table_sizes(conn, schema, tables)
        empty_main = await main_fork_bytes(conn, schema)
        start_lsn = await wal_lsn(conn)
        started = time.perf_counter()
        await insert_all(client, [Noop(i) for i in range(jobs)], max_attempts=case.attempts)
        passes = 0
        timer = CallTimer(*TIMED)
        while True:
            with timer:
                await client.run_until_idle(maintenance_interval=None)
            passes += 1
            await conn.execute(f"UPDATE {s}.deferred_jobs SET run_at = now()")
            promoted = 0
            while True:
                report = await client.run_maintenance()
                promoted += report.promoted
                if not report.promoted:
                    break
            if promoted == 0:
                break
            if passes > case.attempts + 1:
                raise AssertionError(f"{case.key}: more passes than attempts")
        seconds = time.perf_counter() - started
        wal = await wal_bytes_since(conn, start_lsn)
        after = await table_sizes(conn, schema, tables)
        by_table = {t: after[t] - empty[t] for t in tables}
        retained = sum(by_table.values())
        payload = await payload_bytes(conn, schema)
        for table in tables:  # outside the WAL window: what stays once dead rows are gone
            await conn.execute(f"VACUUM {s}.{ident(table)}")
        retained_vacuumed = await main_fork_bytes(conn, schema) - empty_main
        totals = await completion_totals(conn, schema)
        if totals.done_failed != jobs or totals.deferred or totals.completed:
            raise AssertionError(f"{case.key}: expected {jobs} failed jobs, got {totals}")
        attempts_run = await conn.fetchval(f"SELECT count(*) FROM {s}.attempt_closures")
        if attempts_run != jobs * case.attempts:
            raise AssertionError(f"{case.key}: {attempts_run} attempts, expected more")
        await check_history(client, conn, schema, case)
        return RunSample(
            case=case,
            round=round_no,
            jobs=jobs,
            attempts_run=int(attempts_run),
            passes=passes,
            seconds=seconds,
            wal=wal,
            retained=retained,
            retained_vacuumed=retained_vacuumed,
            retained_by_table={k: v for k, v in by_table.items() if v},
            payload_bytes=payload,
            timer=timer.as_dict(),
        )
    finally:
        await client.close()
        await drop_queue_schema(conn, schema)


async def check_history(client: Client, conn: Connection, schema: str, case: Case) -> None:
    """One job's error history: every attempt has an entry, only the latest keeps an output."""
    job_id = await conn.fetchval(f"SELECT max(job_id) FROM {ident(schema)}.done_entries")
    row = await client.get_job(int(job_id))
    if row is None or row.state is not JobState.FAILED:
        raise AssertionError(f"job {job_id} not failed: {row!r}")
    if len(row.errors) != case.attempts:
        raise AssertionError(f"job {job_id}: {len(row.errors)} error entries")
    with_output = [i for i, e in enumerate(row.errors) if "output" in e]
    expected = [case.attempts - 1] if case.output else []
    if with_output != expected:
        raise AssertionError(f"job {job_id}: outputs kept on entries {with_output}")


async def measure(dsn: str, conn: Connection, plan: Plan, seed: int) -> list[RunSample]:
    outputs = make_outputs(256, seed)
    cases = [Case(a, o) for a in plan.attempts for o in (True, False)]
    log("warm-up run (not recorded)")
    await run_once(conn, dsn, Case(3, True), 50, outputs, -1)
    samples: list[RunSample] = []
    for round_no in range(plan.rounds):
        shift = round_no % len(cases)
        for case in cases[shift:] + cases[:shift]:
            sample = await run_once(conn, dsn, case, plan.jobs, outputs, round_no)
            samples.append(sample)
            log(
                f"round {round_no + 1}/{plan.rounds} {case.key:<14} {sample.seconds:6.1f} s"
                f" ({sample.attempts_run / sample.seconds:,.0f} attempts/s)"
                f" WAL {sample.wal_per_job:,.0f} B/job, retained {sample.retained_per_job:,.0f}"
                f" B/job, payload {sample.payload_per_job:,.0f} B/job"
            )
    return samples


@dataclass(frozen=True, slots=True)
class Summary:
    case: Case
    wal_per_job: Stat
    retained_per_job: Stat
    vacuumed_per_job: Stat
    payload_per_job: Stat
    attempts_per_s: Stat
    wal_delta: Stat | None
    retained_delta: Stat | None
    payload_delta: Stat | None
    retained_by_table: dict[str, float]

    def per_attempt(self, stat: Stat) -> Stat:
        return Stat.of(v / self.case.attempts for v in stat.samples)

    def as_row(self) -> dict[str, object]:
        a = self.case.attempts
        return {
            "case": self.case.key,
            "max_attempts": a,
            "output": self.case.output,
            "wal_bytes_per_job": self.wal_per_job,
            "wal_bytes_per_attempt": self.per_attempt(self.wal_per_job),
            "retained_bytes_per_job": self.retained_per_job,
            "retained_bytes_per_attempt": self.per_attempt(self.retained_per_job),
            "retained_bytes_per_job_after_vacuum": self.vacuumed_per_job,
            "payload_bytes_per_job": self.payload_per_job,
            "payload_bytes_per_attempt": self.per_attempt(self.payload_per_job),
            "attempts_per_s": self.attempts_per_s,
            "output_increment_vs_no_output": None
            if self.wal_delta is None
            else {
                "wal_bytes_per_job": self.wal_delta,
                "retained_bytes_per_job": self.retained_delta,
                "payload_bytes_per_job": self.payload_delta,
            },
            "retained_bytes_per_job_by_table": self.retained_by_table,
        }


def summarise(samples: Sequence[RunSample], plan: Plan) -> list[Summary]:
    out = []
    for attempts in plan.attempts:
        for output in (True, False):
            case = Case(attempts, output)
            runs = sorted((s for s in samples if s.case == case), key=lambda s: s.round)
            base = sorted(
                (s for s in samples if s.case == Case(attempts, False)), key=lambda s: s.round
            )
            tables = sorted({t for r in runs for t in r.retained_by_table})
            by_table = {
                t: sum(r.retained_by_table.get(t, 0) for r in runs) / sum(r.jobs for r in runs)
                for t in tables
            }
            out.append(
                Summary(
                    case=case,
                    wal_per_job=Stat.of(r.wal_per_job for r in runs),
                    retained_per_job=Stat.of(r.retained_per_job for r in runs),
                    vacuumed_per_job=Stat.of(r.vacuumed_per_job for r in runs),
                    payload_per_job=Stat.of(r.payload_per_job for r in runs),
                    attempts_per_s=Stat.of(r.attempts_run / r.seconds for r in runs),
                    wal_delta=Stat.paired_diff(
                        [r.wal_per_job for r in runs], [b.wal_per_job for b in base]
                    )
                    if output
                    else None,
                    retained_delta=Stat.paired_diff(
                        [r.retained_per_job for r in runs], [b.retained_per_job for b in base]
                    )
                    if output
                    else None,
                    payload_delta=Stat.paired_diff(
                        [r.payload_per_job for r in runs], [b.payload_per_job for b in base]
                    )
                    if output
                    else None,
                    retained_by_table=by_table,
                )
            )
    return out


def main_table(summaries: Sequence[Summary], plan: Plan) -> Table:
    rows = []
    for s in summaries:
        rows.append(
            (
                s.case.label,
                s.wal_per_job.fmt(),
                s.per_attempt(s.wal_per_job).fmt(spread=False),
                s.retained_per_job.fmt(),
                s.per_attempt(s.retained_per_job).fmt(spread=False),
                s.vacuumed_per_job.fmt(spread=False),
                s.per_attempt(s.vacuumed_per_job).fmt(spread=False),
                s.payload_per_job.fmt(spread=False),
                s.attempts_per_s.fmt(),
            )
        )
    return Table(
        f"Retry storm, {plan.jobs:,} jobs per run, {plan.rounds} rounds",
        (
            "case",
            "WAL B/job (min..max)",
            "WAL B/attempt",
            "retained B/job (min..max)",
            "retained B/attempt",
            "after VACUUM B/job",
            "after VACUUM B/attempt",
            "live payload B/job",
            "attempts/s",
        ),
        tuple(rows),
        caption=(
            "retained: pg_total_relation_size of every table of the schema (partitions, "
            "TOAST, indexes, dead tuples) after the storm, minus the empty schema; after "
            "VACUUM: heap + TOAST + index data once plain VACUUM has cleared dead rows "
            "(promotion deletes each deferred row), free-space/visibility maps excluded. live "
            "payload: pg_column_size(payload) summed over ready, deferred, done and DLQ rows."
        ),
    )


def _median(stat: Stat | None) -> float:
    if stat is None:
        raise ValueError("no paired baseline")
    return stat.median


def growth_table(summaries: Sequence[Summary], plan: Plan) -> tuple[Table, dict[str, object]]:
    lo, hi = min(plan.attempts), max(plan.attempts)
    by = {(s.case.attempts, s.case.output): s for s in summaries}
    rows = []
    data: dict[str, object] = {}

    def ratio_row(label: str, key: str, lo_v: float, hi_v: float) -> None:
        ratio = hi_v / lo_v if lo_v else float("nan")
        rows.append((label, f"{lo_v:,.0f}", f"{hi_v:,.0f}", f"{ratio:.2f}"))
        data[key] = {"at_lo": lo_v, "at_hi": hi_v, "ratio": ratio}

    w_lo, w_hi = by[(lo, True)], by[(hi, True)]
    n_lo, n_hi = by[(lo, False)], by[(hi, False)]
    ratio_row(
        "retained B/attempt, with outputs",
        "retained_per_attempt",
        w_lo.retained_per_job.median / lo,
        w_hi.retained_per_job.median / hi,
    )
    ratio_row(
        "retained after VACUUM B/attempt, with outputs",
        "vacuumed_per_attempt",
        w_lo.vacuumed_per_job.median / lo,
        w_hi.vacuumed_per_job.median / hi,
    )
    ratio_row(
        "WAL B/attempt, with outputs",
        "wal_per_attempt",
        w_lo.wal_per_job.median / lo,
        w_hi.wal_per_job.median / hi,
    )
    ratio_row(
        "outputs' own retained B/attempt (paired Δ vs no output)",
        "output_retained_per_attempt",
        _median(w_lo.retained_delta) / lo,
        _median(w_hi.retained_delta) / hi,
    )
    ratio_row(
        "outputs' own live payload B/attempt (paired Δ)",
        "output_payload_per_attempt",
        _median(w_lo.payload_delta) / lo,
        _median(w_hi.payload_delta) / hi,
    )
    ratio_row(
        "outputs' own WAL B/attempt (paired Δ)",
        "output_wal_per_attempt",
        _median(w_lo.wal_delta) / lo,
        _median(w_hi.wal_delta) / hi,
    )
    ratio_row(
        "retained B/attempt, no outputs (error history alone)",
        "nooutput_retained_per_attempt",
        n_lo.retained_per_job.median / lo,
        n_hi.retained_per_job.median / hi,
    )
    ratio_row(
        "live payload B/attempt, no outputs (error history alone)",
        "nooutput_payload_per_attempt",
        n_lo.payload_per_job.median / lo,
        n_hi.payload_per_job.median / hi,
    )
    quadratic = (hi + 1) / (lo + 1)
    data["quadratic_expectation"] = quadratic
    table = Table(
        f"Growth per attempt: max_attempts {lo} vs {hi}",
        ("measure", f"at {lo}", f"at {hi}", f"{hi} ÷ {lo}"),
        tuple(rows),
        caption=(
            f"Linear growth keeps bytes per attempt flat (ratio ~1). A store keeping every "
            f"attempt's output in every later row grows with the square of attempts: bytes "
            f"per attempt ∝ (attempts + 1) / 2, a ratio of {quadratic:.1f}."
        ),
    )
    return table, data


def breakdown_table(summaries: Sequence[Summary]) -> Table:
    tables = sorted({t for s in summaries for t in s.retained_by_table})
    rows = []
    for s in summaries:
        rows.append((s.case.label, *(f"{s.retained_by_table.get(t, 0.0):,.0f}" for t in tables)))
    return Table(
        "Retained bytes per job by table (after the storm, mean over rounds)",
        ("case", *tables),
        tuple(rows),
        caption="Tables with partitions are summed over their partitions; empty tables omitted.",
    )


def timing_table(samples: Sequence[RunSample]) -> Table:
    names = [t.rsplit(".", 1)[1] for t in TIMED]
    cases = sorted({s.case for s in samples}, key=lambda c: (c.attempts, not c.output))
    rows = []
    for case in cases:
        runs = [s for s in samples if s.case == case]
        cells = []
        for name in names:
            calls = sum(r.timer[name]["calls"] for r in runs)
            seconds = sum(r.timer[name]["seconds"] for r in runs)
            cells.append(f"{1000 * seconds / calls:.2f}" if calls else "—")
        rate = Stat.of(r.attempts_run / r.seconds for r in runs)
        rows.append((case.label, rate.fmt(), *cells))
    return Table(
        "Where a failed attempt's time goes (mean ms per call, awaited by the executor)",
        ("case", "attempts/s", *(f"{n} ms" for n in names)),
        tuple(rows),
        caption=(
            "transitions.fail is the whole failure transition (one transaction). lock_claims "
            "(older engine) is pg_advisory_xact_lock on the attempt's claim batch, so every "
            "general-path transition of jobs claimed together waited for the others; "
            "lock_attempt (newer) takes the claim batch shared and the job exclusively."
        ),
    )


NOTES = """
## Method

The handler records `job.set_output(...)` (a ~1 KiB object of random alphanumerics, which
pglz cannot compress) and raises `RuntimeError`, so every attempt is an executor-recorded
failure on the general failure path: the attempt is closed (`attempt_closures`), a
retryable `deferred_jobs` row carries the payload with the new error entry, and promotion
moves it into a new `ready_entries` row. The final attempt writes a failed `done_entries`
row (the queue's DLQ is off). Retries are made due by SQL
(`UPDATE deferred_jobs SET run_at = now()`) and promoted by `client.run_maintenance()`
until nothing is left to promote. A run is checked: all N jobs failed, N x max_attempts
attempts closed, and one job's error history has one entry per attempt with the output
kept only on the last (none without outputs).
"""


def parse_args(argv: Sequence[str] | None = None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help=f"{QUICK.rounds} rounds of {QUICK.jobs} jobs (default {FULL.rounds} rounds"
        f" of {FULL.jobs})",
    )
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument("--jobs", type=int, help="override jobs per run")
    parser.add_argument("--seed", type=int, default=48, help="seed for output contents")
    return parser.parse_args(argv)


async def amain(args: Any) -> int:
    base = QUICK if args.quick else FULL
    plan = Plan(
        rounds=args.rounds or base.rounds, jobs=args.jobs or base.jobs, attempts=base.attempts
    )
    started = time.perf_counter()
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        await prepare(dsn)
        conn: Connection = await asyncpg.connect(dsn)
        try:
            machine = await machine_info(conn)
            samples = await measure(dsn, conn, plan, args.seed)
        finally:
            await conn.close()
    summaries = summarise(samples, plan)
    growth, growth_data = growth_table(summaries, plan)
    tables = [
        main_table(summaries, plan),
        growth,
        breakdown_table(summaries),
        timing_table(samples),
    ]
    for table in tables:
        print_table(table)
    meta: dict[str, object] = {
        "command": command_line(NAME, sys.argv[1:]),
        "server": "external (--dsn)" if args.dsn else "embedded pgserver",
        "machine": machine,
        "config": {
            "quick": args.quick,
            "rounds": plan.rounds,
            "jobs_per_run": plan.jobs,
            "max_attempts": list(plan.attempts),
            "output_bytes": OUTPUT_BYTES,
            "seed": args.seed,
            "wall_seconds": round(time.perf_counter() - started, 1),
        },
    }
    files = write_results(
        args.out,
        NAME,
        [s.as_row() for s in summaries],
        meta,
        title="Retry storm: every attempt fails with an output",
        tables=tables,
        notes=(NOTES,),
        extra={"growth": growth_data, "runs": [s.as_dict() for s in samples]},
    )
    log(f"wrote {files.json} and {files.markdown} ({time.perf_counter() - started:.0f} s total)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
