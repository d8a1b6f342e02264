"""Reads of one job under a live workload: Client.get_job and GET /api/jobs/{id} on every job
while it moves between states, and how many missed a job that exists (target: none).

The workload is ``benchmarks._live_reads`` (compact and general completions, tags, unique
keys, retries, snoozes, callbacks, duplicate inserts of held keys); the test of the same name
runs it for a few seconds, this case for tens of thousands of reads.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks._engine import queue_schema, session
from benchmarks._harness import Table, report
from benchmarks._live_reads import run

NAME = "one_job_reads"


async def amain(args: Any) -> int:
    reads = args.reads or (5_000 if args.quick else 50_000)
    async with (
        session(args.dsn) as (dsn, conn, machine),
        queue_schema(conn, dsn, "bench_reads") as (
            schema,
            _,
        ),
    ):
        began = time.perf_counter()
        misses = await run(dsn, schema, reads=reads, seconds=3600.0)
        seconds = time.perf_counter() - began
    table = Table(
        f"Reads of one job under a live workload ({misses.jobs:,} jobs, {seconds:.0f} s)",
        ("reads", "of them HTTP", "None", "non-200", "JobNotFound", "keyed re-inserts"),
        (
            (
                f"{misses.reads:,}",
                f"{misses.http_reads:,}",
                str(misses.none),
                str(misses.not_found_http),
                str(misses.job_not_found),
                f"{misses.keyed_inserts:,}",
            ),
        ),
        caption="target: no read misses a job that exists",
    )
    data = [vars(misses)]
    report(
        args,
        NAME,
        data,
        {"machine": machine, "reads": reads},
        title="One-job reads",
        tables=(table,),
    )
    return 1 if misses.total else 0


QUICK_HELP = "5,000 reads (default 50,000)"
OPTIONS = {"--reads": {"type": int, "help": "reads to make"}}
