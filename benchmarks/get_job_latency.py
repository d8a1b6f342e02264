"""get_job latency for compact jobs whose batch rows are full of 4 KiB outputs.

ADR-048's read gate: reading one compact output detoasts its batch row's whole ``outputs``
array (~16 outputs of 4 KiB). Four populations, each completed by the real runtime in its
own run, are read by ``get_job`` on random ids in rounds whose order rotates; every row is
checked. Ratios are per-round medians over the no-output baseline's.
"""

from __future__ import annotations

import random
import statistics
from typing import Any

import orjson

from benchmarks import _engine as engine
from benchmarks import _harness as h
from storage import Client, Job, JobState

NAME = "get_job_latency"
LATENCY = ("median", "p95", "p99")
STRIDE = 1_000_000
"""Job args ``i`` = population x stride + n, so one handler serves every population."""
POPULATIONS = (  # label, output shape, general path
    ("compact, no output (baseline)", None, False),
    ("compact, batch full of 4 KiB numeric arrays", engine.NUMERIC, False),
    ("compact, batch full of 4 KiB many-key objects", engine.MANY_KEYS, False),
    ("general path (tags), 4 KiB numeric array", engine.NUMERIC, True),
)


async def build(client: Client, jobs: int, seed: int) -> list[list[int]]:
    """Complete every population with the real runtime, one run each; their job ids."""
    pools = [
        engine.output_values(shape, 1_024, seed) if shape else None for _, shape, _ in POPULATIONS
    ]

    @client.task(engine.Noop)
    async def handler(job: Job[engine.Noop]) -> None:
        pool = pools[job.args.i // STRIDE]
        if pool is not None:
            job.set_output(pool[job.args.i % len(pool)])

    ids = []
    for index, (_, _, general) in enumerate(POPULATIONS):
        args = [engine.Noop(index * STRIDE + n) for n in range(jobs)]
        ids.append(await engine.insert_all(client, args, **({"tags": ["x"]} if general else {})))
        await client.run_until_idle(maintenance_interval=None)
    return ids


async def read(client: Client, population: int, job_id: int) -> float:
    """Milliseconds for one checked ``get_job``."""
    ms, row = await h.timed(client.get_job(job_id))
    _, shape, general = POPULATIONS[population]
    if row is None or row.state is not JobState.COMPLETED:
        raise AssertionError(f"job {job_id} not completed: {row!r}")
    if row.storage_path != ("general" if general else "compact"):
        raise AssertionError(f"job {job_id} on the {row.storage_path} path")
    if (shape is None) != (row.output is None) or (shape and len(orjson.dumps(row.output)) < 3_000):
        raise AssertionError(f"job {job_id}: unexpected output")
    return ms


QUICK_HELP = "3 rounds x 150 calls, 1,000 jobs per population (default 5 x 400, 4,000)"
ROUNDS = True


async def amain(args: Any) -> int:
    jobs, calls = (1_000, 150) if args.quick else (4_000, 400)
    rounds = args.rounds or (3 if args.quick else 5)
    rng = random.Random(args.seed)
    async with (
        engine.session(args.dsn) as (dsn, conn, machine),
        engine.queue_schema(conn, dsn, "bench_get") as (_, client),
    ):
        ids = await build(client, jobs, args.seed)
        await conn.execute("VACUUM ANALYZE")
        for p, population in enumerate(ids):  # warm-up, not recorded
            for job_id in population[:50]:
                await read(client, p, job_id)
        lat: list[list[list[float]]] = [[] for _ in POPULATIONS]  # population, round, call
        for round_no in range(rounds):
            for p in h.rotate(range(len(ids)), round_no):
                lat[p].append([await read(client, p, rng.choice(ids[p])) for _ in range(calls)])
            now = ", ".join(f"{statistics.median(p[-1]):.2f} ms" for p in lat)
            engine.log(f"round {round_no + 1}/{rounds}: {now}")
    base = [statistics.median(r) for r in lat[0]]
    rows, data = [], []
    for (label, _, _), samples in zip(POPULATIONS, lat, strict=True):
        data.append({"population": label, "ms_by_round": samples})
        s = h.latency_stats([ms for r in samples for ms in r])
        medians = [statistics.median(r) for r in samples]
        ratio = h.Stat.paired_ratio(medians, base).fmt(".2f")
        rows.append((label, *h.stat_cells(s, LATENCY, ".2f"), h.Stat.of(medians).fmt(".2f"), ratio))
    table = h.Table(
        f"get_job latency, ms ({rounds} rounds x {calls} calls per population)",
        ("population", *LATENCY, "round medians", "x baseline, paired"),
        tuple(rows),
    )
    meta = {"machine": machine, "rounds": rounds, "jobs_per_population": jobs}
    return h.report(args, NAME, data, meta, title="get_job latency", tables=[table])
