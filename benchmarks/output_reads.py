"""A failure group's kept outputs and a kind's schema drift, each read with its window full.

``Client.schema_drift`` (the Kinds screen, under the selected kind) reads the kind's outputs
within the last good output's window (the newest 1,000 compact and 1,000 general-path
completions) and those its failed attempts kept among the newest 1,000 failed, deferred and
dead-lettered jobs each, and checks each with ``schema_violations`` in the client, so its cost
is the window's, whatever the history: timed here with every completion in the window of the
kind and carrying an output (one in ten not fitting), and for the failing kind, whose failed
jobs fill the kept window (the completed kind's read walks that window too and finds none).
``Client.failure_group_outputs`` (the Failure groups screen, under the selected group) reads
the members through the groups' own window (the newest 2,000 failed jobs, per source) and
counts shapes and values in PostgreSQL: timed with one group filling it, without and with a
split field, beside ``failure_groups()`` (the screen's own read) on the same rows. "Loop
stall": the longest the event loop the read runs on went without a turn during it (median over
the reads), what a console on that loop would feel; the drift's checking yields every 50
outputs. Jobs are run by the real runtime; ``--quick``
fills a fifth of each window.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks import _engine as engine
from benchmarks import _harness as h
from storage import Client, Job
from storage.read.drift import KEPT_SCAN_CAP

NAME = "output_reads"
MS = ("median", "p95", "max", "stall")
SIGNATURE = "RuntimeError: the import stopped"
SCHEMA = {
    "type": "object",
    "properties": {
        "rows": {"type": "integer"},
        "status": {"enum": ["ok", "partial", "failed"]},
        "note": {"type": "string"},
    },
    "required": ["rows", "status"],
}


def _output(i: int) -> dict[str, Any]:
    """About 200 bytes; one in ten breaks the schema (rows a string)."""
    rows: Any = "many" if i % 10 == 0 else (i % 3) * 200
    return {"rows": rows, "status": ("ok", "partial", "failed")[i % 3], "note": "n" * 150}


async def _seed(client: Client, schema: str, completions: int, failures: int) -> tuple[str, str]:
    done, failing = f"report_{schema}", f"import_{schema}"

    @client.task(kind=done)
    async def report(job: Job[dict[str, int]]) -> None:
        job.set_output(_output(job.args["i"]))

    @client.task(kind=failing)
    async def imports(job: Job[dict[str, int]]) -> None:
        job.set_output(_output(job.args["i"]))
        raise RuntimeError("the import stopped")

    client.job_kind_descriptor(done, output={"type": "Report", "schema": SCHEMA})
    client.job_kind_descriptor(failing, output={"type": "Report", "schema": SCHEMA})
    await client.sync_descriptors()
    started = time.perf_counter()
    args = [{"i": i} for i in range(completions)]
    await client.insert_many(args, kind=done)
    await client.insert_many(args, kind=done, tags=["general"])
    await client.insert_many([{"i": i} for i in range(failures)], kind=failing, max_attempts=1)
    await client.run_until_idle(maintenance_interval=None)
    engine.log(f"{2 * completions + failures:,} jobs run in {time.perf_counter() - started:.1f} s")
    return done, failing


async def _longest_gap(done: asyncio.Event) -> float:
    """The longest time (ms) between two turns of this event loop until ``done``."""
    longest, last = 0.0, time.perf_counter()
    while not done.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    return longest * 1000


async def _time(call: Any, reps: int) -> dict[str, float]:
    """Latency of ``reps`` reads, and ``stall``: the longest the event loop went without a turn
    while one ran (what a console on that loop would feel), the median over the reads."""
    samples, stalls = [], []
    for n in range(reps + 1):
        done = asyncio.Event()
        tick = asyncio.create_task(_longest_gap(done))
        ms, _ = await h.timed(call())
        done.set()
        longest = await tick
        if n:  # the first warms the plan and the cache
            samples.append(ms)
            stalls.append(longest)
    return {**h.latency_stats(samples), "stall": sorted(stalls)[len(stalls) // 2]}


async def amain(args: Any) -> int:
    scale = 5 if args.quick else 1
    completions, failures = 1_000 // scale, 2_000 // scale
    reps = args.reps or (10 if args.quick else 30)
    rows: list[tuple[str, ...]] = []
    data: list[dict[str, object]] = []
    async with (
        engine.session(args.dsn) as (dsn, conn, machine),
        engine.queue_schema(conn, dsn, "bench_outputs") as (schema, client),
    ):
        done, failing = await _seed(client, schema, completions, failures)
        drift = await client.schema_drift(done)
        kept_drift = await client.schema_drift(failing)
        kept = await client.failure_group_outputs(failing, SIGNATURE, field="rows")
        if (drift.checked, kept.kept) != (2 * completions, failures):
            raise AssertionError(f"windows not full: {drift.checked} checked, {kept.kept} kept")
        if kept_drift.kept_checked != min(failures, KEPT_SCAN_CAP):
            raise AssertionError(f"kept window not full: {kept_drift.kept_checked} checked")
        cases = (
            (
                f"schema_drift ({drift.checked:,} outputs, {drift.drifted:,} drifted)",
                lambda: client.schema_drift(done),
            ),
            (
                f"schema_drift, kept by failed attempts ({kept_drift.kept_checked:,} outputs, "
                f"{kept_drift.kept_drifted:,} drifted)",
                lambda: client.schema_drift(failing),
            ),
            (
                f"failure_group_outputs ({kept.members:,} members)",
                lambda: client.failure_group_outputs(failing, SIGNATURE),
            ),
            (
                "failure_group_outputs, split by rows",
                lambda: client.failure_group_outputs(failing, SIGNATURE, field="rows"),
            ),
            (
                "failure_groups (the G screen's list, same rows)",
                lambda: client.failure_groups(kind=failing),
            ),
        )
        for what, call in cases:
            stats = await _time(call, reps)
            rows.append((what, *h.stat_cells(stats, MS, ".1f")))
            data.append({"case": what, **stats})
        engine.log(f"built and timed in {time.perf_counter() - args.started:.0f} s")
    table = h.Table(
        "output_reads: ms per read",
        ("case", "median ms", "p95 ms", "max ms", "loop stall ms"),
        tuple(rows),
        caption=f"{reps} reads each; windows filled as the docstring says",
    )
    meta = {"machine": machine, "config": {"quick": args.quick, "reps": reps}}
    return h.report(
        args,
        NAME,
        data,
        meta,
        title="Bulk output reads with their windows full",
        tables=(table,),
        notes=(__doc__.split("\n\n", 1)[1] if __doc__ else "",),
    )


QUICK_HELP = "a fifth of each window, 10 reads per case (default: full windows, 30 reads)"
OPTIONS = {"--reps": {"type": int, "help": "reads per case"}}
