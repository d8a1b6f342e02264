"""Whole lifecycle (enqueue, then run until drained) with and without outputs.

Each run inserts N jobs into a fresh schema and runs them with the real runtime until idle:
no output (baseline), 100 B (ADR-048's gate, next to its baseline in flipping order, ratios
paired), 4 KiB numeric array and many-key object, general path via tags and via a unique key,
handlers that await 50 ms (1/4 the jobs) or spin 5 ms of CPU (1/20), no output by ``awa-tui
worker --processes 1`` / ``2`` (their CPU counts as the client's), and 100 B with the
completion flush committed synchronously as before issue #28 (``syncflush``, an A/B against
``small100``). The fast cases run the same number of jobs: a run has a fixed cost (start, the
last claims, the idle check, shutdown: about 0.2-0.4 s here), so a smaller run would be
charged more per job. Workers 0 means the engine's own sizing (``storage.runtime.sizing``).
Per run: enqueue, run and lifecycle jobs/s, WAL, client CPU (and the GC's share) and server
CPU per job; and the run phase's own client and server CPU per job, the two-core bound they
imply (cores / their sum) and the run's jobs/s over it. ``--wait-events`` samples the server's
backends through the run phase (``benchmarks._wait_events``): where the cores' idle share goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from benchmarks import _engine as engine
from benchmarks import _harness as h
from benchmarks import _wait_events as waits
from storage import Client, Job, Tasks
from storage.runtime import batcher

NAME = "lifecycle"
OUTPUT_POOL = 1_024
GATE_MIN_RATIO = 0.95  # ADR-048's "within a few percent" of the baseline's jobs/s
TARGET, tasks = "benchmarks.lifecycle:tasks", Tasks()  # what the worker processes run
START_SECONDS = 120.0  # for every worker process to say it started


@tasks.task(engine.Noop)
async def noop(job: Job[engine.Noop]) -> None: ...


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    label: str
    shape: engine.Shape | None
    general: bool = False
    unique: bool = False  # a unique key per job (general path, plus its unique_keys row)
    processes: int = 0  # run by `awa-tui worker --processes N` (N x workers), not in-process
    share: int = 1  # runs 1/share of the planned jobs (at least 200)
    slow: str = ""  # "sleep" (await 50 ms) or "cpu" (5 ms of CPU without awaiting)
    sync_flush: bool = False  # the completion flush waits for its WAL, as before issue #28

    def jobs(self, plan_jobs: int) -> int:
        return max(200, plan_jobs // self.share) if self.share > 1 else plan_jobs

    def insert_options(self) -> dict[str, Any]:
        if self.unique:
            return {"unique_key": lambda args: f"k{args.i}"}
        return {"tags": ["x"]} if self.general else {}


CASES = (
    Case("none", "no output (baseline)", None),
    Case("small100", "100 B output, every job", engine.SMALL),
    Case("num4k", "4 KiB numeric array, every job", engine.NUMERIC),
    Case("obj4k", "4 KiB many-key object, every job", engine.MANY_KEYS),
    Case("general", "general path (tags), no output", None, general=True),
    Case("unique", "unique key per job, no output", None, general=True, unique=True),
    Case("procs1", "no output, 1 worker process", None, processes=1),
    Case("procs2", "no output, 2 worker processes", None, processes=2),
    Case("sleep50", "handler awaits 50 ms, no output", None, share=4, slow="sleep"),
    Case("cpu5", "handler spins 5 ms of CPU, no output", None, share=20, slow="cpu"),
    Case("syncflush", "100 B output, flush committed synchronously", engine.SMALL, sync_flush=True),
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
    run_client_cpu_s: float = 0.0  # the run phase alone (after the inserts)
    run_server_cpu_s: float = 0.0
    waits: tuple[float, ...] = ()  # mean backends per sample in each waits.CLASSES, if sampled

    def per_job_us(self, seconds: float) -> float:
        return 1e6 * seconds / self.jobs

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / (self.insert_s + self.run_s)

    @property
    def total_cpu_us(self) -> float:
        return self.per_job_us(self.client_cpu_s + (self.server_cpu_s or 0.0))

    @property
    def run_bound_share(self) -> float:
        """Run-phase jobs/s over the CPU bound its CPU per job implies, cores / (client +
        server run-phase CPU per job): the share of the cores the run phase kept busy."""
        cpu = self.run_client_cpu_s + self.run_server_cpu_s
        return cpu / ((os.cpu_count() or 1) * self.run_s)


async def run_once(
    conn: h.Connection,
    dsn: str,
    values: dict[str, list[Any] | None],
    tuned: dict[str, Any],
    sample_waits: bool,
    case: Case,
    jobs: int,
    workers: int,
    round_no: int,
) -> Run:
    """One measured lifecycle in a fresh schema, checked, then dropped."""
    async with engine.queue_schema(conn, dsn, "bench_lc") as (schema, client):
        outputs = values[case.key]
        if case.slow:
            register_slow(client, case.slow)
        else:
            engine.register_handler(client, outputs)
        await h.checkpoint(conn)
        server = await h.ServerCpu.find(conn)
        server_started = server.seconds() if server else 0.0
        if case.processes:
            await client.pause_queue("default")
        start_lsn = await h.wal_lsn(conn)
        cpu_started = time.process_time()
        started = time.perf_counter()
        with h.GcClock() as gc_clock, flush_commit(case.sync_flush):
            args = [engine.Noop(i) for i in range(jobs)]
            await engine.insert_all(client, args, **case.insert_options())
            inserted = time.perf_counter()
            run_cpu_started = time.process_time()
            run_server_started = server.seconds() if server else 0.0
            sample: waits.WaitSample | None = None
            if case.processes:
                argv = ["--processes", str(case.processes)]
                argv += ["--concurrency", str(workers)] if workers else []
                run_s, tree_cpu = await in_processes(client, conn, dsn, argv, schema, jobs)
            else:
                async with sampled_if(sample_waits, dsn) as sample:
                    await client.run_until_idle(
                        concurrency=workers or None, maintenance_interval=None, **tuned
                    )
                run_s, tree_cpu = time.perf_counter() - inserted, 0.0
        ended = time.process_time()
        cpu, run_cpu = ended - cpu_started + tree_cpu, ended - run_cpu_started + tree_cpu
        server_ended = server.seconds() if server else 0.0
        server_cpu = server_ended - server_started if server else None
        run_server_cpu = server_ended - run_server_started
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
        timing = (inserted - started, run_s, wal, cpu, gc_clock.seconds, server_cpu)
        means = tuple(sample.mean(c) for c in waits.CLASSES) if sample else ()
        return Run(case.key, workers, round_no, jobs, *timing, run_cpu, run_server_cpu, means)


@contextlib.asynccontextmanager
async def sampled_if(wanted: bool, dsn: str) -> AsyncIterator[waits.WaitSample | None]:
    """The server's backends sampled through the block when ``wanted`` (else None)."""
    if not wanted:
        yield None
        return
    async with waits.sampled(dsn) as sample:
        yield sample


async def in_processes(
    client: Any, conn: h.Connection, dsn: str, argv: list[str], schema: str, jobs: int
) -> tuple[float, float]:
    """The run phase by the worker command (started while the queue is paused), timed from its
    start lines to the last completion: its seconds, its processes' CPU seconds (/proc)."""
    worker = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "awa_tui", "worker", TARGET, "--schema", schema, *argv),
        env={**os.environ, "AWA_DSN": dsn},
        stderr=asyncio.subprocess.PIPE,
    )
    assert worker.stderr is not None
    done = f"SELECT sum(completed_count) FROM {h.ident(schema)}.receipt_completion_batches"
    try:
        started_n = 0
        try:  # bounded: once a run of 4 waited > 5 min for a process's start line (load 16)
            async with asyncio.timeout(START_SECONDS):
                while started_n < int(argv[1]):
                    line = await worker.stderr.readline()
                    assert line, "the worker command exited before it started"
                    started_n += f"started {TARGET}".encode() in line
        except TimeoutError:
            raise RuntimeError(
                f"{started_n} of {argv[1]} worker processes started in {START_SECONDS:g} s"
            ) from None
        tree = h.ServerCpu(worker.pid)  # the parent's tree, as for a postmaster
        tree_started, started = tree.seconds(), time.perf_counter()
        await client.resume_queue("default")
        while (await conn.fetchval(done) or 0) < jobs:
            assert worker.returncode is None, "the worker command exited"
            await asyncio.sleep(0.01)
        run_s, cpu = time.perf_counter() - started, tree.seconds() - tree_started
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
        stderr = (await worker.communicate())[1].decode()
    if worker.returncode != 0:
        raise RuntimeError(f"the worker command exited {worker.returncode}: {stderr}")
    return run_s, cpu


def round_order(cases: Sequence[Case], workers: Sequence[int], round_no: int) -> list[Any]:
    """Per worker count: the gated pair adjacent, its order flipped every round, then the
    other cases rotated; the worker counts rotate too."""
    pair = [BASELINE, GATED] if round_no % 2 == 0 else [GATED, BASELINE]
    pair = [c for c in pair if c in cases]
    rest = h.rotate([c for c in cases if c not in (BASELINE, GATED)], round_no)
    return [(w, c) for w in h.rotate(workers, round_no) for c in pair + rest]


def paired(
    mine: Sequence[Run], base: dict[int, Run], metric: Callable[[Run], float], diff: bool = False
) -> h.Stat:
    """``metric`` of each run over (or minus) the baseline's in the same round."""
    pair = h.Stat.paired_diff if diff else h.Stat.paired_ratio
    return pair([metric(r) for r in mine], [metric(base[r.round]) for r in mine])


def summarise(runs: Sequence[Run], cases: Sequence[Case], workers: Sequence[int]) -> list[Any]:
    """The tables' rows per (case, workers): throughput, cost, the CPU bound and, when sampled,
    the server's backends; ratios paired per round."""
    speed, cost, bound, wait = [], [], [], []
    for w in workers:
        base = {r.round: r for r in runs if r.workers == w and r.case == BASELINE.key}
        for case in cases:
            mine = [r for r in runs if r.workers == w and r.case == case.key]
            ratio = paired(mine, base, lambda r: r.jobs_per_s)
            if case is GATED:
                verdict = "pass" if ratio.median >= GATE_MIN_RATIO else "not met"
            else:
                verdict = "baseline" if case is BASELINE else "reported"
            per_run = [(r.jobs / r.insert_s, r.jobs / r.run_s, r.jobs_per_s) for r in mine]
            rates = [h.Stat.of(column).fmt() for column in zip(*per_run, strict=True)]
            row = (case.label, str(w or "auto"))
            speed.append((*row, *rates, ratio.fmt(".3f"), verdict))
            wal = [r.wal / r.jobs for r in mine]
            wal_diff = paired(mine, base, lambda r: r.wal / r.jobs, diff=True)
            client = h.Stat.of(r.per_job_us(r.client_cpu_s) for r in mine)
            gc_share = h.Stat.of(100 * r.gc_s / r.client_cpu_s for r in mine)
            server = [r.per_job_us(r.server_cpu_s) for r in mine if r.server_cpu_s is not None]
            cpu = paired(mine, base, lambda r: r.total_cpu_us)
            wal_cells = (h.Stat.of(wal).fmt(), wal_diff.fmt(signed=True))
            server_cell = h.Stat.of(server).fmt() if server else "-"
            cpu_cells = (client.fmt(), gc_share.fmt(".1f"), server_cell, cpu.fmt(".3f"))
            cost.append((*row, *wal_cells, *cpu_cells))
            bound.append((*row, *run_bound_cells(mine)))
            if all(r.waits for r in mine):
                busy = h.Stat.of(r.run_client_cpu_s / r.run_s for r in mine).fmt(".2f")
                means = zip(*(r.waits for r in mine), strict=True)
                wait.append((*row, busy, *(h.Stat.of(m).fmt(".2f") for m in means)))
    return [speed, cost, bound, wait]


def run_bound_cells(mine: Sequence[Run]) -> list[str]:
    """The run phase against the CPU bound its own CPU per job implies (issue #28's 0.75)."""
    cores = os.cpu_count() or 1
    client = [r.per_job_us(r.run_client_cpu_s) for r in mine]
    server = [r.per_job_us(r.run_server_cpu_s) for r in mine]
    limit = [1e6 * cores / (c + s) for c, s in zip(client, server, strict=True)]
    cells = [h.Stat.of(r.jobs / r.run_s for r in mine), h.Stat.of(client), h.Stat.of(server)]
    cells.append(h.Stat.of(limit))
    return [c.fmt() for c in cells] + [h.Stat.of(r.run_bound_share for r in mine).fmt(".2f")]


@contextlib.contextmanager
def flush_commit(synchronous: bool) -> Iterator[None]:
    """With ``synchronous``, the handler flush's transaction begins as it did before issue #28
    (a plain BEGIN: its commit waits for the WAL flush), the A/B case for ``BEGIN_FLUSH``."""
    if not synchronous:
        yield
        return
    kept, batcher.BEGIN_FLUSH = batcher.BEGIN_FLUSH, "BEGIN"
    try:
        yield
    finally:
        batcher.BEGIN_FLUSH = kept


def register_slow(client: Client, slow: str) -> None:
    """The slow handlers: an await of 50 ms, or 5 ms of this thread's CPU in one go."""

    @client.task(engine.Noop)
    async def handler(job: Job[engine.Noop]) -> None:
        if slow == "sleep":
            await asyncio.sleep(0.05)
            return
        until = time.thread_time() + 0.005
        while time.thread_time() < until:
            pass


QUICK_HELP = "3 rounds of 5,000 jobs (default 11 rounds of 20,000)"
ROUNDS = True
OPTIONS = {
    "--jobs": {"type": int, "help": "jobs per run"},
    "--concurrency": {"type": int, "action": "append", "help": "workers, repeatable (0: engine's)"},
    "--claim-size": {"type": int, "help": "runtime claim_size (engine default)"},
    "--cases": {"default": ",".join(c.key for c in CASES[:6]), "help": "comma-separated keys"},
    "--wait-events": {"action": "store_true", "help": "sample the server's backends meanwhile"},
}


async def amain(args: Any) -> int:
    rounds = args.rounds or (3 if args.quick else 11)
    jobs = args.jobs or (5_000 if args.quick else 20_000)
    workers = args.concurrency or [0, 512]
    keys = {*args.cases.split(","), BASELINE.key}
    cases = [c for c in CASES if c.key in keys]
    values = {
        c.key: engine.output_values(c.shape, OUTPUT_POOL, args.seed) if c.shape else None
        for c in cases
    }
    tuned = {"claim_size": args.claim_size} if args.claim_size else {}
    async with engine.session(args.dsn) as (dsn, conn, machine):
        measure = functools.partial(run_once, conn, dsn, values, tuned, args.wait_events)
        for case in cases:  # warm-up, not recorded
            await measure(case, 1_000, workers[0], -1)
        runs: list[Run] = []
        for round_no in range(rounds):
            for w, case in round_order(cases, workers, round_no):
                runs.append(run := await measure(case, case.jobs(jobs), w, round_no))
                engine.log(
                    f"round {round_no + 1}/{rounds} {w or 'auto':>4} workers {case.key:<9}"
                    f" {run.jobs_per_s:7,.0f} jobs/s {run.wal / run.jobs:6,.0f} B WAL/job"
                )
    speed, cost, bound, wait = summarise(runs, cases, workers)
    speed_columns = "case | workers | enqueue jobs/s | run jobs/s | lifecycle jobs/s"
    cost_columns = "case | workers | WAL B/job | Δ WAL vs none | client CPU µs/job"
    cost_columns += " | GC % of client CPU | server CPU µs/job | client+server CPU x none"
    tables: tuple[h.Table, ...] = (
        h.Table(
            f"Whole lifecycle, {jobs:,} jobs per run, {rounds} rounds",
            (*h.columns(speed_columns), "x none, paired", f"gate ≥{GATE_MIN_RATIO}"),
            tuple(speed),
            caption="lifecycle = jobs / (enqueue + run); median (min..max) over rounds.",
        ),
        h.Table(
            "WAL and CPU per job",
            h.columns(cost_columns),
            tuple(cost),
            caption="WAL: insert LSN difference after CHECKPOINT, inserts included. "
            "Server CPU: the PostgreSQL processes' CPU time from /proc.",
        ),
        h.Table(
            "Run phase against the CPU bound",
            h.columns(
                "case | workers | run jobs/s | client CPU µs/job | server CPU µs/job"
                " | CPU bound jobs/s | run ÷ bound"
            ),
            tuple(bound),
            caption=f"Run phase only (after the inserts). CPU bound = {os.cpu_count()} cores / "
            "(client + server CPU per job); run ÷ bound is the share of the cores kept busy.",
        ),
    )
    if wait:
        tables += (
            h.Table(
                "Run phase: the client's busy share and the server's backends",
                ("case", "workers", "client busy", *(f"backends {c}" for c in waits.CLASSES)),
                tuple(wait),
                caption=f"client busy = its run-phase CPU / run seconds (1.00 = one core). "
                f"Backends: mean per pg_stat_activity sample, every {waits.INTERVAL * 1000:g} ms.",
            ),
        )
    meta = {"machine": machine, "rounds": rounds, "jobs": jobs, "workers": workers}
    meta["claim_size"] = args.claim_size or "engine default"
    title = "Whole lifecycle with and without outputs"
    rows = [asdict(r) for r in runs]
    return h.report(args, NAME, rows, meta, title=title, tables=tables)
