"""Client instructions per job, counted by valgrind: what a 100 B output costs, without noise.

Run as ``python -m benchmarks.instructions [--quick] [--dsn DSN] [--out DIR]``.

Wall time and CPU time on a shared 2-core host move by ±30% between runs, more than the
few percent the 100 B gate is about. Instructions do not: ``valgrind --tool=callgrind``
counts the instructions a process executes, the same whatever else the machine is doing.
Each measurement runs the ``lifecycle`` workload (insert N jobs, then
``run_until_idle(concurrency=W)``, with a no-op handler or one that records a 100 B output
from the same pool ``lifecycle`` uses) in a child Python process under callgrind, against
a PostgreSQL that is not under valgrind. A child runs at two job counts and the difference
is divided by the difference in jobs, which cancels interpreter start-up, imports and
teardown. What remains is every instruction the client spends per job: inserting,
claiming, the handler, the output's conversion and checks, the completion flush, the
garbage collector. The server's share is not counted here (``lifecycle`` reports its CPU).

Counts still move a little between repeats, because how many jobs share a claim or a flush
depends on timing; the table shows median (min..max) over repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks._engine import (
    SMALL,
    Noop,
    drop_queue_schema,
    insert_all,
    log,
    new_queue_schema,
    output_values,
    prepare,
    register_lifecycle_handler,
)
from benchmarks._harness import (
    Connection,
    Stat,
    Table,
    base_parser,
    command_line,
    embedded_or_dsn,
    machine_info,
    print_table,
    write_results,
)
from storage import Client

NAME = "instructions"
OUTPUT_POOL = 1_024
CASES = {"none": "no output (baseline)", "small100": "100 B output, every job"}


@dataclass(frozen=True, slots=True)
class Plan:
    repeats: int
    job_counts: tuple[int, int]
    concurrencies: tuple[int, ...]


FULL = Plan(repeats=2, job_counts=(1_000, 4_000), concurrencies=(64, 512))
QUICK = Plan(repeats=1, job_counts=(1_000, 3_000), concurrencies=(512,))


async def child(dsn: str, case: str, jobs: int, concurrency: int, seed: int) -> None:
    """The measured process: one lifecycle run in a fresh schema, then exit."""
    conn: Connection = await asyncpg.connect(dsn)
    schema = await new_queue_schema(conn, "bench_ins")
    client = await Client.connect(dsn, schema)
    try:
        outputs = output_values(SMALL, OUTPUT_POOL, seed) if case == "small100" else None
        register_lifecycle_handler(client, outputs)
        await insert_all(client, [Noop(i) for i in range(jobs)])
        await client.run_until_idle(concurrency=concurrency, maintenance_interval=None)
    finally:
        await client.close()
        await drop_queue_schema(conn, schema)
        await conn.close()


def count_instructions(dsn: str, case: str, jobs: int, concurrency: int, seed: int) -> int:
    """Instructions executed by a child process running one lifecycle under callgrind."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={scratch}/out",
            sys.executable,
            "-m",
            f"benchmarks.{NAME}",
            "--child",
            case,
            str(jobs),
            str(concurrency),
            str(seed),
            "--dsn",
            dsn,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        detail = done.stderr[-2000:].replace(dsn, "<dsn>")  # valgrind echoes the command
        raise RuntimeError(f"callgrind run failed ({done.returncode}): {detail}")
    return int(found.group(1))


@dataclass(frozen=True, slots=True)
class Sample:
    case: str
    concurrency: int
    repeat: int
    per_job: float


def measure(dsn: str, plan: Plan, seed: int) -> list[Sample]:
    small, large = plan.job_counts
    samples: list[Sample] = []
    for repeat in range(plan.repeats):
        for conc in plan.concurrencies:
            cases = list(CASES) if repeat % 2 == 0 else list(CASES)[::-1]
            for case in cases:
                counts = [count_instructions(dsn, case, n, conc, seed) for n in (small, large)]
                per_job = (counts[1] - counts[0]) / (large - small)
                log(f"repeat {repeat + 1} {conc} workers {case}: {per_job:,.0f} instructions/job")
                samples.append(Sample(case, conc, repeat, per_job))
    return samples


@dataclass(frozen=True, slots=True)
class Summary:
    case: str
    concurrency: int
    per_job: Stat
    delta: Stat
    ratio: Stat

    def as_row(self) -> dict[str, object]:
        return {
            "case": self.case,
            "label": CASES[self.case],
            "concurrency": self.concurrency,
            "client_instructions_per_job": self.per_job,
            "delta_vs_none": self.delta,
            "none_over_case": self.ratio,
        }


def summarise(samples: Sequence[Sample], plan: Plan) -> list[Summary]:
    out: list[Summary] = []
    for conc in plan.concurrencies:
        base = {s.repeat: s.per_job for s in samples if s.concurrency == conc and s.case == "none"}
        for case in CASES:
            runs = [s for s in samples if s.concurrency == conc and s.case == case]
            measured = [s.per_job for s in runs]
            baseline = [base[s.repeat] for s in runs]
            out.append(
                Summary(
                    case=case,
                    concurrency=conc,
                    per_job=Stat.of(s.per_job for s in runs),
                    delta=Stat.paired_diff(measured, baseline),
                    ratio=Stat.paired_ratio(baseline, measured),
                )
            )
    return out


def instructions_table(summaries: Sequence[Summary]) -> Table:
    rows = tuple(
        (
            CASES[s.case],
            f"{s.concurrency}",
            s.per_job.fmt(",.0f"),
            s.delta.fmt(",.0f", signed=True),
            s.ratio.fmt(".3f"),
        )
        for s in summaries
    )
    return Table(
        "Client instructions per job (valgrind callgrind)",
        ("case", "workers", "instructions/job", "Δ vs none", "none ÷ case"),
        rows,
        caption=(
            "Instructions the benchmark's client process executes per job over the whole "
            "lifecycle (insert, claim, handler, completion), from two callgrind runs per "
            "measurement at different job counts. 'none ÷ case' is what the client alone would "
            "keep of its no-output throughput if it were the bottleneck and ran at the same "
            "instructions per cycle."
        ),
    )


def parse_args(argv: Sequence[str] | None = None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help=f"{QUICK.repeats} repeat at 512 workers (default {FULL.repeats} repeats at 64"
        " and 512)",
    )
    parser.add_argument("--seed", type=int, default=48, help="seed for output contents")
    # The measured child process (internal): case, jobs, workers, seed.
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def amain(args: Any) -> int:
    if shutil.which("valgrind") is None:
        log("valgrind is not installed (Debian: apt-get install valgrind); nothing measured")
        return 2
    version = await asyncio.to_thread(
        subprocess.run, ["valgrind", "--version"], capture_output=True, text=True, check=False
    )
    plan = QUICK if args.quick else FULL
    started = time.perf_counter()
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        await prepare(dsn)
        conn: Connection = await asyncpg.connect(dsn)
        try:
            machine = await machine_info(conn)
        finally:
            await conn.close()
        samples = await asyncio.to_thread(measure, dsn, plan, args.seed)
    summaries = summarise(samples, plan)
    table = instructions_table(summaries)
    print_table(table)
    meta: dict[str, object] = {
        "command": command_line(NAME, sys.argv[1:]),
        "server": "external (--dsn)" if args.dsn else "embedded pgserver",
        "machine": machine,
        "config": {
            "quick": args.quick,
            "repeats": plan.repeats,
            "job_counts": list(plan.job_counts),
            "concurrencies": list(plan.concurrencies),
            "output_pool": OUTPUT_POOL,
            "seed": args.seed,
            "valgrind": version.stdout.strip(),
            "wall_seconds": round(time.perf_counter() - started, 1),
        },
    }
    files = write_results(
        Path(args.out),
        NAME,
        [s.as_row() for s in summaries],
        meta,
        title="Client instructions per job, with and without a 100 B output",
        tables=(table,),
        extra={"samples": [vars_of(s) for s in samples]},
    )
    log(f"wrote {files.json} and {files.markdown} ({time.perf_counter() - started:.0f} s total)")
    return 0


def vars_of(sample: Sample) -> dict[str, object]:
    return {
        "case": sample.case,
        "concurrency": sample.concurrency,
        "repeat": sample.repeat,
        "instructions_per_job": sample.per_job,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        case, jobs, workers, seed = args.child
        asyncio.run(child(args.dsn, case, int(jobs), int(workers), int(seed)))
        return 0
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
