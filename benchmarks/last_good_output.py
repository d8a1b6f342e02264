"""The last good output of a kind (``Client.last_good_output``) on 10,000 vs 1,000,000 jobs.

What the job detail shows beside a failed attempt's kept output, and the Kinds screen under the
selected kind: the newest completed output of the kind (and queue). Its read is bounded (the
newest 200 compact completion batches and 2,000 completed done entries by finish time), so it
must cost the same on a large history as on a small one; target under 20 ms. Timed: the
benchmark's kind (found in the newest batch: the read stops at once), the same in its queue,
and a kind no job has (the worst case: every bounded row is read and nothing is found). The
histories are ``browser_pages``' (the small one run by the real runtime, the large one that
history replicated by SQL, both settled); ``--quick`` times the small one only.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from benchmarks import _engine as engine
from benchmarks import _harness as h
from benchmarks.browser_pages import histories, settle
from storage import Client, kind_of

NAME = "last_good_output"
LARGE_JOBS = 1_000_000
MS = ("median", "p95", "max")
TARGET_MS = 20.0


async def _time(client: Client, kind: str, queue: str | None, reps: int) -> list[float]:
    samples = []
    for n in range(reps + 1):
        ms, _ = await h.timed(client.last_good_output(kind, queue))
        if n:  # the first warms the plan and the cache
            samples.append(ms)
    return samples


async def amain(args: Any) -> int:
    large = None if args.quick else LARGE_JOBS
    reps = args.reps or (30 if args.quick else 100)
    kind = kind_of(engine.Noop)
    cases = (
        ("its kind", kind, None),
        ("its kind and queue", kind, "default"),
        ("a kind with no job (reads every bounded row)", "no_such_kind", None),
    )
    rows: list[tuple[str, ...]] = []
    data: list[dict[str, object]] = []
    async with (
        engine.session(args.dsn) as (dsn, conn, machine),
        histories(conn, dsn, args.seed, large) as built,
        contextlib.AsyncExitStack() as clients,
    ):
        for label, schema, jobs in built:
            await settle(conn, dsn, schema)
            client = await clients.enter_async_context(await Client.connect(dsn, schema))
            found = await client.last_good_output(kind)
            if found is None:
                raise AssertionError(f"{label}: no last good output of {kind}")
            for what, k, queue in cases:
                stats = h.latency_stats(await _time(client, k, queue, reps))
                rows.append((label, what, *h.stat_cells(stats, MS, ".2f")))
                data.append({"db": label, "jobs": jobs, "case": what, **stats})
        engine.log(f"built and timed in {time.perf_counter() - args.started:.0f} s")
    worst = max(float(row["p95"]) for row in data)  # type: ignore[arg-type]
    table = h.Table(
        "last_good_output: ms per read",
        ("history", "case", *(f"{m} ms" for m in MS)),
        tuple(rows),
        caption=f"target: under {TARGET_MS:g} ms; worst p95 {worst:.2f} ms; {reps} reads each",
    )
    meta = {"machine": machine, "config": {"quick": args.quick, "reps": reps, "large": large}}
    return h.report(
        args,
        NAME,
        data,
        meta,
        title="The last good output of a kind",
        tables=(table,),
        notes=(__doc__.split("\n\n", 1)[1] if __doc__ else "",),
    )


QUICK_HELP = "10,000 jobs only, 30 reads per case (default also 1,000,000 jobs, 100 reads)"
OPTIONS = {"--reps": {"type": int, "help": "reads per case"}}
