"""get_job latency for compact jobs whose batch rows are full of 4 KiB outputs.

ADR-048's read gate: reading one compact output detoasts its batch row's whole ``outputs``
array (~16 outputs of 4 KiB). Four populations, each completed by the real runtime in its
own run, are read by ``get_job`` on random ids in rounds whose order rotates; every row is
checked. Ratios are per-round medians over the no-output baseline's.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson

from benchmarks._engine import (
    MANY_KEYS,
    NUMERIC,
    Noop,
    drop_queue_schema,
    insert_all,
    log,
    new_queue_schema,
    output_values,
    prepare,
)
from benchmarks._harness import (
    Connection,
    Stat,
    Table,
    base_parser,
    embedded_or_dsn,
    latency_stats,
    machine_info,
    report,
)
from storage import Client, Job, JobState

NAME = "get_job_latency"
STRIDE = 1_000_000
"""Job args ``i`` = population x stride + n, so one handler serves every population."""
POPULATIONS = (  # label, output shape, general path
    ("compact, no output (baseline)", None, False),
    ("compact, batch full of 4 KiB numeric arrays", NUMERIC, False),
    ("compact, batch full of 4 KiB many-key objects", MANY_KEYS, False),
    ("general path (tags), 4 KiB numeric array", NUMERIC, True),
)


async def build(client: Client, jobs: int, seed: int) -> list[list[int]]:
    """Complete every population with the real runtime, one run each; their job ids."""
    pools = [output_values(shape, 1_024, seed) if shape else None for _, shape, _ in POPULATIONS]

    @client.task(Noop)
    async def handler(job: Job[Noop]) -> None:
        pool = pools[job.args.i // STRIDE]
        if pool is not None:
            job.set_output(pool[job.args.i % len(pool)])

    ids = []
    for index, (_, _, general) in enumerate(POPULATIONS):
        options: dict[str, Any] = {"tags": ["x"]} if general else {}
        ids.append(
            await insert_all(client, [Noop(index * STRIDE + n) for n in range(jobs)], **options)
        )
        await client.run_until_idle(maintenance_interval=None)
    return ids


async def read(client: Client, population: int, job_id: int) -> float:
    """Milliseconds for one checked ``get_job``."""
    started = time.perf_counter()
    row = await client.get_job(job_id)
    ms = (time.perf_counter() - started) * 1000
    _, shape, general = POPULATIONS[population]
    if row is None or row.state is not JobState.COMPLETED:
        raise AssertionError(f"job {job_id} not completed: {row!r}")
    if row.storage_path != ("general" if general else "compact"):
        raise AssertionError(f"job {job_id} on the {row.storage_path} path")
    if (shape is None) != (row.output is None) or (shape and len(orjson.dumps(row.output)) < 3_000):
        raise AssertionError(f"job {job_id}: unexpected output")
    return ms


def parse_args(argv: Sequence[str] | None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help="3 rounds x 150 calls, 1,000 jobs per population (default 5 x 400, 4,000)",
    )
    parser.add_argument("--rounds", type=int)
    return parser.parse_args(argv)


async def amain(args: Any) -> int:
    jobs, calls = (1_000, 150) if args.quick else (4_000, 400)
    rounds = args.rounds or (3 if args.quick else 5)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        await prepare(dsn)
        conn: Connection = await asyncpg.connect(dsn)
        schema = await new_queue_schema(conn, "bench_get")
        client = await Client.connect(dsn, schema)
        try:
            machine = await machine_info(conn)
            ids = await build(client, jobs, args.seed)
            await conn.execute("VACUUM ANALYZE")
            for p, population in enumerate(ids):  # warm-up, not recorded
                for job_id in population[:50]:
                    await read(client, p, job_id)
            lat: list[list[list[float]]] = [[] for _ in POPULATIONS]  # population, round, call
            for round_no in range(rounds):
                for p in [*range(len(ids))][round_no % len(ids) :] + [*range(len(ids))][
                    : round_no % len(ids)
                ]:
                    lat[p].append([await read(client, p, rng.choice(ids[p])) for _ in range(calls)])
                log(
                    f"round {round_no + 1}/{rounds}: "
                    + ", ".join(f"{statistics.median(p[-1]):.2f} ms" for p in lat)
                )
        finally:
            await client.close()
            await drop_queue_schema(conn, schema)
            await conn.close()
    base = [statistics.median(r) for r in lat[0]]
    rows = []
    for (label, _, _), samples in zip(POPULATIONS, lat, strict=True):
        s = latency_stats([ms for r in samples for ms in r])
        medians = [statistics.median(r) for r in samples]
        rows.append(
            (
                label,
                f"{s['median']:.2f}",
                f"{s['p95']:.2f}",
                f"{s['p99']:.2f}",
                Stat.of(medians).fmt(".2f"),
                Stat.paired_ratio(medians, base).fmt(".2f"),
            )
        )
    table = Table(
        f"get_job latency, ms ({rounds} rounds x {calls} calls per population)",
        ("population", "median", "p95", "p99", "round medians", "x baseline, paired"),
        tuple(rows),
    )
    meta = {"machine": machine, "rounds": rounds, "jobs_per_population": jobs}
    data = [
        {"population": label, "ms_by_round": samples}
        for (label, _, _), samples in zip(POPULATIONS, lat, strict=True)
    ]
    return report(args, NAME, data, meta, started=started, title="get_job latency", tables=[table])
