"""Whole lifecycle (enqueue, then run until drained) with and without outputs.

Each run inserts N jobs into a fresh schema and runs them with the real runtime until idle:
no output (baseline), 100 B (ADR-048's gate, next to its baseline in flipping order, ratios
paired), 4 KiB numeric array and many-key object, general path via tags and via a unique key.
Every case runs the same number of jobs: a run has a fixed cost (start, the last claims, the
idle check, shutdown: about 0.2-0.4 s here), so a smaller run would be charged more per job.
Per run: enqueue, run and lifecycle jobs/s, WAL, client CPU (and the GC's share) and server
CPU per job.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from benchmarks import _engine as engine
from benchmarks import _harness as h

NAME = "lifecycle"
OUTPUT_POOL = 1_024
GATE_MIN_RATIO = 0.95  # ADR-048's "within a few percent" of the baseline's jobs/s


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    label: str
    shape: engine.Shape | None
    general: bool = False
    unique: bool = False  # a unique key per job (general path, plus its unique_keys row)


CASES = (
    Case("none", "no output (baseline)", None),
    Case("small100", "100 B output, every job", engine.SMALL),
    Case("num4k", "4 KiB numeric array, every job", engine.NUMERIC),
    Case("obj4k", "4 KiB many-key object, every job", engine.MANY_KEYS),
    Case("general", "general path (tags), no output", None, general=True),
    Case("unique", "unique key per job, no output", None, general=True, unique=True),
)
BASELINE, GATED = CASES[0], CASES[1]


@dataclass(frozen=True, slots=True)
class Run:
    case: str
    workers: int
    round: int
    jobs: int
    insert_s: float
    run_s: float
    wal: int
    client_cpu_s: float
    gc_s: float
    server_cpu_s: float | None

    def per_job_us(self, seconds: float) -> float:
        return 1e6 * seconds / self.jobs

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / (self.insert_s + self.run_s)

    @property
    def total_cpu_us(self) -> float:
        return self.per_job_us(self.client_cpu_s + (self.server_cpu_s or 0.0))


async def run_once(
    conn: h.Connection,
    dsn: str,
    values: dict[str, list[Any] | None],
    tuned: dict[str, Any],
    case: Case,
    jobs: int,
    workers: int,
    round_no: int,
) -> Run:
    """One measured lifecycle in a fresh schema, checked, then dropped."""
    async with engine.queue_schema(conn, dsn, "bench_lc") as (schema, client):
        engine.register_handler(client, outputs := values[case.key])
        await h.checkpoint(conn)
        server = await h.ServerCpu.find(conn)
        server_started = server.seconds() if server else 0.0
        start_lsn = await h.wal_lsn(conn)
        cpu_started = time.process_time()
        started = time.perf_counter()
        with h.GcClock() as gc_clock:
            await engine.insert_all(
                client, [engine.Noop(i) for i in range(jobs)], **_insert_options(case)
            )
            inserted = time.perf_counter()
            await client.run_until_idle(concurrency=workers, maintenance_interval=None, **tuned)
            finished = time.perf_counter()
        cpu = time.process_time() - cpu_started
        server_cpu = server.seconds() - server_started if server else None
        wal = await h.wal_bytes_since(conn, start_lsn)
        totals = await engine.completion_totals(conn, schema)
        compact, general = (0, jobs) if case.general else (jobs, 0)
        recorded = jobs if outputs is not None else 0
        if (totals.compact_jobs, totals.done_completed) != (compact, general) or (
            totals.compact_outputs + totals.done_outputs != recorded
        ):
            raise AssertionError(f"{case.key}: {jobs} jobs, {recorded} outputs expected: {totals}")
        job_id = await conn.fetchval(f'SELECT max(job_id) FROM "{schema}".ready_entries')
        row = await client.get_job(int(job_id))
        i = row.args["i"] if row is not None and isinstance(row.args, dict) else -1
        expected = None if outputs is None else outputs[int(i) % len(outputs)]
        if row is None or orjson.dumps(row.output) != orjson.dumps(expected):
            raise AssertionError(f"job {job_id}: stored output differs from the recorded one")
        insert_s, run_s = inserted - started, finished - inserted
        timing = (insert_s, run_s, wal, cpu, gc_clock.seconds, server_cpu)
        return Run(case.key, workers, round_no, jobs, *timing)


def round_order(cases: Sequence[Case], workers: Sequence[int], round_no: int) -> list[Any]:
    """Per worker count: the gated pair adjacent, its order flipped every round, then the
    other cases rotated; the worker counts rotate too."""
    pair = [BASELINE, GATED] if round_no % 2 == 0 else [GATED, BASELINE]
    pair = [c for c in pair if c in cases]
    rest = h.rotate([c for c in cases if c not in (BASELINE, GATED)], round_no)
    return [(w, c) for w in h.rotate(workers, round_no) for c in pair + rest]


def paired(mine: Sequence[Run], base: dict[int, Run], metric: Callable[[Run], float]) -> h.Stat:
    return h.Stat.paired_ratio([metric(r) for r in mine], [metric(base[r.round]) for r in mine])


def summarise(runs: Sequence[Run], cases: Sequence[Case], workers: Sequence[int]) -> list[Any]:
    """Two tables' rows per (case, workers): throughput and cost, ratios paired per round."""
    speed, cost = [], []
    for w in workers:
        base = {r.round: r for r in runs if r.workers == w and r.case == BASELINE.key}
        for case in cases:
            mine = [r for r in runs if r.workers == w and r.case == case.key]
            ratio = paired(mine, base, lambda r: r.jobs_per_s)
            if case is GATED:
                verdict = "pass" if ratio.median >= GATE_MIN_RATIO else "not met"
            else:
                verdict = "baseline" if case is BASELINE else "reported"
            enqueue = h.Stat.of(r.jobs / r.insert_s for r in mine)
            run, life = (
                h.Stat.of(r.jobs / r.run_s for r in mine),
                h.Stat.of(r.jobs_per_s for r in mine),
            )
            row = (case.label, str(w))
            speed.append((*row, enqueue.fmt(), run.fmt(), life.fmt(), ratio.fmt(".3f"), verdict))
            wal = [r.wal / r.jobs for r in mine]
            wal_diff = h.Stat.paired_diff(
                wal, [base[r.round].wal / base[r.round].jobs for r in mine]
            )
            client = h.Stat.of(r.per_job_us(r.client_cpu_s) for r in mine)
            gc_share = h.Stat.of(100 * r.gc_s / r.client_cpu_s for r in mine)
            server = [r.per_job_us(r.server_cpu_s) for r in mine if r.server_cpu_s is not None]
            cpu = paired(mine, base, lambda r: r.total_cpu_us)
            wal_cells = (h.Stat.of(wal).fmt(), wal_diff.fmt(signed=True))
            server_cell = h.Stat.of(server).fmt() if server else "-"
            cpu_cells = (client.fmt(), gc_share.fmt(".1f"), server_cell, cpu.fmt(".3f"))
            cost.append((*row, *wal_cells, *cpu_cells))
    return [speed, cost]


def _insert_options(case: Case) -> dict[str, Any]:
    if case.unique:
        return {"unique_key": lambda args: f"k{args.i}"}
    return {"tags": ["x"]} if case.general else {}


def parse_args(argv: Sequence[str] | None) -> Any:
    quick = "3 rounds of 5,000 jobs (default 11 rounds of 20,000)"
    parser = h.base_parser(NAME, __doc__, quick_help=quick, rounds=True)
    parser.add_argument("--jobs", type=int, help="jobs per run")
    parser.add_argument("--concurrency", type=int, action="append", help="workers (repeatable)")
    parser.add_argument("--claim-size", type=int, help="runtime claim_size (engine default)")
    parser.add_argument(
        "--cases", default=",".join(c.key for c in CASES), help="comma-separated case keys"
    )
    return parser.parse_args(argv)


async def amain(args: Any) -> int:
    rounds = args.rounds or (3 if args.quick else 11)
    jobs = args.jobs or (5_000 if args.quick else 20_000)
    workers = args.concurrency or [64, 512]
    keys = {*args.cases.split(","), BASELINE.key}
    cases = [c for c in CASES if c.key in keys]
    values = {
        c.key: engine.output_values(c.shape, OUTPUT_POOL, args.seed) if c.shape else None
        for c in cases
    }
    tuned = {"claim_size": args.claim_size} if args.claim_size else {}
    started = time.perf_counter()
    async with engine.session(args.dsn) as (dsn, conn, machine):
        measure = functools.partial(run_once, conn, dsn, values, tuned)
        for case in cases:  # warm-up, not recorded
            await measure(case, 1_000, workers[0], -1)
        runs: list[Run] = []
        for round_no in range(rounds):
            for w, case in round_order(cases, workers, round_no):
                runs.append(run := await measure(case, jobs, w, round_no))
                engine.log(
                    f"round {round_no + 1}/{rounds} {w:>4} workers {case.key:<9}"
                    f" {run.jobs_per_s:7,.0f} jobs/s {run.wal / run.jobs:6,.0f} B WAL/job"
                )
    speed, cost = summarise(runs, cases, workers)
    tables = (
        h.Table(
            f"Whole lifecycle, {jobs:,} jobs per run, {rounds} rounds",
            (
                "case",
                "workers",
                "enqueue jobs/s",
                "run jobs/s",
                "lifecycle jobs/s",
                "x none, paired",
                f"gate ≥{GATE_MIN_RATIO}",
            ),
            tuple(speed),
            caption="lifecycle = jobs / (enqueue + run); median (min..max) over rounds.",
        ),
        h.Table(
            "WAL and CPU per job",
            (
                "case",
                "workers",
                "WAL B/job",
                "Δ WAL vs none",
                "client CPU µs/job",
                "GC % of client CPU",
                "server CPU µs/job",
                "client+server CPU x none",
            ),
            tuple(cost),
            caption="WAL: insert LSN difference after CHECKPOINT, inserts included. "
            "Server CPU: the PostgreSQL processes' CPU time from /proc.",
        ),
    )
    meta = {
        "machine": machine,
        "rounds": rounds,
        "jobs": jobs,
        "workers": workers,
        "claim_size": args.claim_size or "engine default",
    }
    title = "Whole lifecycle with and without outputs"
    rows = [asdict(r) for r in runs]
    return h.report(args, NAME, rows, meta, started=started, title=title, tables=tables)
