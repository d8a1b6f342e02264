"""Client instructions per job, by valgrind (callgrind): the 100 B output gate without noise.

Wall time on a shared host moves more than the gate; instruction counts do not. The
``lifecycle`` workload runs in a child process under callgrind (the server is not) at two job
counts; the difference over the difference in jobs cancels start-up and teardown. Counts move
~0.5% between repeats and a little with the job counts: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import asyncpg

from benchmarks import _engine as engine
from benchmarks import _harness as h

NAME = "instructions"
CASES = {
    "none": "no output (baseline)",
    "small100": "100 B output, every job",
    "nogc": "no output, cyclic GC disabled",
}


async def child(dsn: str, case: str, jobs: int, workers: int, seed: int) -> None:
    """The measured process: one lifecycle in a fresh schema, then exit."""
    if case == "nogc":  # the difference to "none" is the cyclic collector's share
        gc.disable()
    conn: h.Connection = await asyncpg.connect(dsn)
    try:
        async with engine.queue_schema(conn, dsn, "bench_ins") as (_, client):
            outputs = (
                engine.output_values(engine.SMALL, 1_024, seed) if case == "small100" else None
            )
            engine.register_handler(client, outputs)
            await engine.insert_all(client, [engine.Noop(i) for i in range(jobs)])
            await client.run_until_idle(concurrency=workers, maintenance_interval=None)
    finally:
        await conn.close()


def count(dsn: str, case: str, jobs: int, workers: int, seed: int) -> int:
    """Instructions a child process executes running one lifecycle under callgrind."""
    with tempfile.TemporaryDirectory() as scratch:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out"]
        command += [sys.executable, "-m", "benchmarks", NAME, "--dsn", dsn]
        command += ["--child", case, str(jobs), str(workers), str(seed)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        detail = done.stderr[-2000:].replace(dsn, "<dsn>")  # valgrind echoes the command
        raise RuntimeError(f"callgrind run failed ({done.returncode}): {detail}")
    return int(found.group(1))


def measure(
    dsn: str, repeats: int, counts: tuple[int, int], workers: Sequence[int], seed: int
) -> Any:
    """Instructions per job by (case, workers, repeat); the case order flips per repeat."""
    lo, hi = counts
    per_job: dict[tuple[str, int, int], float] = {}
    for repeat in range(repeats):
        for w in workers:
            for case in list(CASES)[:: 1 if repeat % 2 == 0 else -1]:
                n = [count(dsn, case, jobs, w, seed) for jobs in counts]
                per_job[case, w, repeat] = value = (n[1] - n[0]) / (hi - lo)
                engine.log(f"repeat {repeat + 1} {w} workers {case}: {value:,.0f}")
    return per_job


QUICK_HELP = "1 repeat at 512 workers, 1,000 and 3,000 jobs (default 2 repeats at 64 and 512,"
QUICK_HELP += " 1,000 and 4,000 jobs)"
OPTIONS = {"--child": {"nargs": 4, "help": argparse.SUPPRESS}}  # case jobs workers seed


async def amain(args: Any) -> int:
    if args.child:  # one measured run, in the process callgrind watches
        case, jobs, workers, seed = args.child
        await child(args.dsn, case, int(jobs), int(workers), int(seed))
        return 0
    if shutil.which("valgrind") is None:
        engine.log("valgrind is not installed (Debian: apt-get install valgrind); nothing measured")
        return 2
    repeats, counts, workers = (
        (1, (1_000, 3_000), [512]) if args.quick else (2, (1_000, 4_000), [64, 512])
    )
    async with engine.session(args.dsn) as (dsn, _, machine):
        per_job = await asyncio.to_thread(measure, dsn, repeats, counts, workers, args.seed)
    rows = []
    for w in workers:
        base = [per_job["none", w, r] for r in range(repeats)]
        for case, label in CASES.items():
            mine = [per_job[case, w, r] for r in range(repeats)]
            pairs = zip(mine, base, strict=True)  # output: of its job; GC: of the job with GC
            share = h.Stat.of(100 * (m - b) / (m if case != "nogc" else -b) for m, b in pairs)
            diff, ratio = h.Stat.paired_diff(mine, base), h.Stat.paired_ratio(base, mine)
            own = h.Stat.of(mine)
            cells = (own.fmt(), diff.fmt(signed=True), share.fmt(".1f"), ratio.fmt(".3f"))
            rows.append((label, str(w), *cells))
    table = h.Table(
        "Client instructions per job (valgrind callgrind)",
        ("case", "workers", "instructions/job", "Δ vs none", "share %", "none ÷ case"),
        tuple(rows),
        caption=f"Two runs per measurement ({counts[0]:,} and {counts[1]:,} jobs); "
        "share: the output's part of its job, the GC's of the job without it; "
        "'none ÷ case' is the throughput the client keeps where it is the bottleneck.",
    )
    meta = {"machine": machine, "repeats": repeats, "job_counts": counts, "workers": workers}
    samples = [
        {"case": c, "workers": w, "repeat": r, "per_job": v} for (c, w, r), v in per_job.items()
    ]
    return h.report(args, NAME, samples, meta, title="Client instructions per job", tables=[table])
