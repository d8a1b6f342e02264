"""get_job latency for compact jobs in batches full of 4 KiB outputs, against no outputs.

Run as ``python -m benchmarks.get_job_latency [--quick] [--dsn DSN] [--out DIR]``.

ADR-048 *Benchmark gates*: "Read latency: get_job for a compact-completed job when batches
are full of 4 KiB outputs". Reading one compact output detoasts its batch row's whole
``outputs`` array, which the 64 KiB split keeps to ~16-17 outputs of 4 KiB.

One queue-storage schema holds several populations, each completed by the real runtime in
its own run so its batch rows are homogeneous:

* ``compact_none``: compact-completed, no output (the baseline);
* ``compact_num4k``: compact-completed, a ~4 KiB numeric array on every job;
* ``compact_obj4k``: compact-completed, a ~4 KiB many-key object on every job;
* ``general_num4k``: inserted with ``tags=["x"]``, so completed on the general path
  (``done_entries.output``), with a ~4 KiB numeric array.

Then ``client.get_job(id)`` is called sequentially on random ids of each population, in
rounds whose case order rotates; every returned row is checked (state, path, output size).
Reported: median, p95 and p99 over all calls; the spread of the per-round medians; and the
per-round ratio of medians to ``compact_none``. A second table times the bare SQL that
reads one output (subscript of the batch array vs the done row's column) to isolate the
detoast.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson

from benchmarks._engine import (
    MANY_KEYS,
    NUMERIC,
    Noop,
    Shape,
    completion_totals,
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
    command_line,
    embedded_or_dsn,
    ident,
    latency_stats,
    machine_info,
    print_table,
    write_results,
)
from storage import Client, Job, JobState

NAME = "get_job_latency"
POPULATION_STRIDE = 1_000_000
"""Job args ``i`` = population index x stride + n, so one handler serves every population."""


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    jobs_per_population: int
    calls_per_round: int
    sql_calls: int


FULL = Plan(rounds=5, jobs_per_population=4_000, calls_per_round=400, sql_calls=400)
QUICK = Plan(rounds=3, jobs_per_population=1_000, calls_per_round=150, sql_calls=150)


@dataclass(frozen=True, slots=True)
class Population:
    key: str
    label: str
    shape: Shape | None
    general: bool = False


POPULATIONS: tuple[Population, ...] = (
    Population("compact_none", "compact, no output (baseline)", None),
    Population("compact_num4k", "compact, batch full of 4 KiB numeric arrays", NUMERIC),
    Population("compact_obj4k", "compact, batch full of 4 KiB many-key objects", MANY_KEYS),
    Population("general_num4k", "general path (tags), 4 KiB numeric array", NUMERIC, general=True),
)


@dataclass(slots=True)
class Built:
    population: Population
    ids: list[int]
    batch_rows: int
    jobs_per_batch_row: float
    outputs_text_per_row: float
    outputs_stored_per_row: float


@dataclass(slots=True)
class Latencies:
    by_round: dict[int, list[float]] = field(default_factory=dict)

    def all(self) -> list[float]:
        return [v for values in self.by_round.values() for v in values]


async def build(
    conn: Connection, client: Client, schema: str, plan: Plan, seed: int
) -> list[Built]:
    """Complete every population with the real runtime, one run each."""
    pools: dict[int, list[Any] | None] = {}
    for index, pop in enumerate(POPULATIONS):
        pools[index] = output_values(pop.shape, 1_024, seed) if pop.shape else None

    @client.task(Noop)
    async def handler(job: Job[Noop]) -> None:
        pool = pools[job.args.i // POPULATION_STRIDE]
        if pool is not None:
            job.set_output(pool[job.args.i % len(pool)])

    s = ident(schema)
    built: list[Built] = []
    for index, pop in enumerate(POPULATIONS):
        before = await conn.fetchval(
            f"SELECT coalesce(max(batch_id), 0) FROM {s}.receipt_completion_batches"
        )
        args = [Noop(index * POPULATION_STRIDE + n) for n in range(plan.jobs_per_population)]
        options: dict[str, Any] = {"tags": ["x"]} if pop.general else {}
        ids = await insert_all(client, args, **options)
        started = time.perf_counter()
        await client.run_until_idle(maintenance_interval=None)
        log(f"built {pop.key}: {len(ids):,} jobs in {time.perf_counter() - started:.1f} s")
        row = await conn.fetchrow(
            f"""SELECT count(*) AS rows, coalesce(avg(completed_count), 0) AS per_row,
                       coalesce(avg((SELECT sum(octet_length(o::text)) FROM unnest(outputs) o)),
                                0) AS text_bytes,
                       coalesce(avg(pg_column_size(outputs)), 0) AS stored_bytes
                  FROM {s}.receipt_completion_batches WHERE batch_id > $1""",
            before,
        )
        assert row is not None
        built.append(
            Built(
                pop,
                ids,
                int(row["rows"]),
                float(row["per_row"]),
                float(row["text_bytes"]),
                float(row["stored_bytes"]),
            )
        )
    totals = await completion_totals(conn, schema)
    general = sum(len(b.ids) for b in built if b.population.general)
    if totals.done_completed != general or totals.completed != sum(len(b.ids) for b in built):
        raise AssertionError(f"unexpected terminal rows: {totals}")
    return built


def check_row(row: Any, pop: Population, job_id: int) -> None:
    if row is None or row.state is not JobState.COMPLETED:
        raise AssertionError(f"job {job_id} ({pop.key}) not completed: {row!r}")
    expected_path = "general" if pop.general else "compact"
    if row.storage_path != expected_path:
        raise AssertionError(f"job {job_id} on {row.storage_path}, expected {expected_path}")
    if pop.shape is None:
        if row.output is not None:
            raise AssertionError(f"job {job_id} has an unexpected output")
    elif row.output is None or len(orjson.dumps(row.output)) < 3_000:
        raise AssertionError(f"job {job_id} lacks its 4 KiB output")


async def measure(
    client: Client, built: Sequence[Built], plan: Plan, seed: int
) -> dict[str, Latencies]:
    rng = random.Random(seed)
    out = {b.population.key: Latencies() for b in built}
    # Warm-up: caches and prepared statements, not recorded.
    for b in built:
        for job_id in rng.sample(b.ids, min(50, len(b.ids))):
            check_row(await client.get_job(job_id), b.population, job_id)
    for round_no in range(plan.rounds):
        order = list(built[round_no % len(built) :]) + list(built[: round_no % len(built)])
        for b in order:
            samples: list[float] = []
            for _ in range(plan.calls_per_round):
                job_id = rng.choice(b.ids)
                started = time.perf_counter()
                row = await client.get_job(job_id)
                samples.append((time.perf_counter() - started) * 1000)
                check_row(row, b.population, job_id)
            out[b.population.key].by_round[round_no] = samples
        log(
            f"round {round_no + 1}/{plan.rounds}: "
            + ", ".join(
                f"{k} {statistics.median(v.by_round[round_no]):.2f} ms" for k, v in out.items()
            )
        )
    return out


async def sql_reads(
    conn: Connection, schema: str, built: Sequence[Built], plan: Plan, seed: int
) -> dict[str, list[float]]:
    """Latency of the bare SQL that fetches one output, per population (one round trip)."""
    s = ident(schema)
    compact = (
        f"SELECT b.outputs[array_position(b.job_ids, $1::bigint)]::text"
        f" FROM {s}.receipt_completion_batches b"
        f" WHERE b.min_job_id <= $1 AND b.max_job_id >= $1 AND b.job_ids @> ARRAY[$1::bigint]"
    )
    compact_ids = (
        f"SELECT b.attempts[array_position(b.job_ids, $1::bigint)]"
        f" FROM {s}.receipt_completion_batches b"
        f" WHERE b.min_job_id <= $1 AND b.max_job_id >= $1 AND b.job_ids @> ARRAY[$1::bigint]"
    )
    general = f"SELECT output::text FROM {s}.done_entries WHERE job_id = $1"
    rng = random.Random(seed + 1)
    out: dict[str, list[float]] = {}
    for b in built:
        if b.population.general:
            cases = [(f"{b.population.key}: done_entries.output", general)]
        elif b.population.shape is None:
            cases = [(f"{b.population.key}: batch attempts[k] (no outputs)", compact_ids)]
        else:
            cases = [(f"{b.population.key}: batch outputs[k]", compact)]
        for label, sql in cases:
            stmt = await conn.prepare(sql)
            for job_id in b.ids[:20]:
                await stmt.fetchval(job_id)
            samples: list[float] = []
            for _ in range(plan.sql_calls):
                job_id = rng.choice(b.ids)
                started = time.perf_counter()
                await stmt.fetchval(job_id)
                samples.append((time.perf_counter() - started) * 1000)
            out[label] = samples
    return out


def latency_table(built: Sequence[Built], lat: dict[str, Latencies], plan: Plan) -> Table:
    base = lat["compact_none"]
    base_medians = [statistics.median(base.by_round[r]) for r in sorted(base.by_round)]
    rows = []
    for b in built:
        mine = lat[b.population.key]
        stats = latency_stats(mine.all())
        medians = [statistics.median(mine.by_round[r]) for r in sorted(mine.by_round)]
        ratio = Stat.paired_ratio(medians, base_medians)
        rows.append(
            (
                b.population.label,
                f"{stats['median']:.2f}",
                f"{stats['p95']:.2f}",
                f"{stats['p99']:.2f}",
                Stat.of(medians).fmt(".2f"),
                ratio.fmt(".2f"),
                "—" if b.population.general else f"{b.jobs_per_batch_row:,.1f}",
                "—"
                if b.population.shape is None or b.population.general
                else f"{b.outputs_text_per_row / 1024:,.1f}"
                f" / {b.outputs_stored_per_row / 1024:,.1f}",
            )
        )
    return Table(
        f"get_job latency, ms ({plan.rounds} rounds x {plan.calls_per_round} calls per case)",
        (
            "job",
            "median",
            "p95",
            "p99",
            "per-round median (min..max)",
            "x compact no-output, paired",
            "jobs / batch row",
            "outputs per row KiB text / stored",
        ),
        tuple(rows),
        caption=(
            "Client.get_job(id) end to end (pool acquire, two round trips for a compact job, "
            "one plus an output fetch for a general one, row decoding), sequential calls on "
            "random ids. stored = pg_column_size(outputs), i.e. after TOAST compression."
        ),
    )


def sql_table(sql: dict[str, list[float]]) -> Table:
    rows = []
    for label, samples in sql.items():
        stats = latency_stats(samples)
        rows.append((label, f"{stats['median']:.3f}", f"{stats['p95']:.3f}"))
    return Table(
        "Bare SQL: read one job's output (one round trip, prepared)",
        ("read", "median ms", "p95 ms"),
        tuple(rows),
        caption=(
            "The compact read subscripts the batch's outputs array, which detoasts (and "
            "decompresses) the whole array: ~64 KiB of text for 4 KiB outputs."
        ),
    )


def parse_args(argv: Sequence[str] | None = None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help=f"{QUICK.rounds} rounds of {QUICK.calls_per_round} calls over"
        f" {QUICK.jobs_per_population:,} jobs per population (default {FULL.rounds} x"
        f" {FULL.calls_per_round} over {FULL.jobs_per_population:,})",
    )
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument("--seed", type=int, default=48, help="seed for outputs and sampling")
    return parser.parse_args(argv)


async def amain(args: Any) -> int:
    base = QUICK if args.quick else FULL
    plan = Plan(
        rounds=args.rounds or base.rounds,
        jobs_per_population=base.jobs_per_population,
        calls_per_round=base.calls_per_round,
        sql_calls=base.sql_calls,
    )
    started = time.perf_counter()
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        await prepare(dsn)
        conn: Connection = await asyncpg.connect(dsn)
        try:
            machine = await machine_info(conn)
            schema = await new_queue_schema(conn, "bench_get")
            client = await Client.connect(dsn, schema)
            try:
                built = await build(conn, client, schema, plan, args.seed)
                await conn.execute("VACUUM ANALYZE")
                lat = await measure(client, built, plan, args.seed)
                sql = await sql_reads(conn, schema, built, plan, args.seed)
            finally:
                await client.close()
                await drop_queue_schema(conn, schema)
        finally:
            await conn.close()
    tables = [latency_table(built, lat, plan), sql_table(sql)]
    for table in tables:
        print_table(table)
    rows: list[dict[str, object]] = []
    for b in built:
        rows.append(
            {
                "population": b.population.key,
                "label": b.population.label,
                "jobs": len(b.ids),
                "batch_rows": b.batch_rows,
                "jobs_per_batch_row": b.jobs_per_batch_row,
                "outputs_text_bytes_per_row": b.outputs_text_per_row,
                "outputs_stored_bytes_per_row": b.outputs_stored_per_row,
                "latency_ms": latency_stats(lat[b.population.key].all()),
                "round_medians_ms": Stat.of(
                    statistics.median(v) for v in lat[b.population.key].by_round.values()
                ),
            }
        )
    meta: dict[str, object] = {
        "command": command_line(NAME, sys.argv[1:]),
        "server": "external (--dsn)" if args.dsn else "embedded pgserver",
        "machine": machine,
        "config": {
            "quick": args.quick,
            "rounds": plan.rounds,
            "jobs_per_population": plan.jobs_per_population,
            "calls_per_round_per_case": plan.calls_per_round,
            "seed": args.seed,
            "wall_seconds": round(time.perf_counter() - started, 1),
        },
    }
    files = write_results(
        args.out,
        NAME,
        rows,
        meta,
        title="get_job latency with batches full of 4 KiB outputs",
        tables=tables,
        notes=(NOTES,),
        extra={"sql_ms": {k: latency_stats(v) for k, v in sql.items()}},
    )
    log(f"wrote {files.json} and {files.markdown} ({time.perf_counter() - started:.0f} s total)")
    return 0


NOTES = """
## Method

Populations are completed by the real runtime (`run_until_idle`, default claim settings),
one run per population, in one schema; then `VACUUM ANALYZE`. Every `get_job` result is
checked: completed, on the expected storage path, and (for output populations) carrying a
~4 KiB output. The gate (ADR-048): reading a compact job's output when its batch row is
full of 4 KiB outputs. The ADR accepts that this detoasts about 64 KiB of text per read;
the table shows what that costs against a compact job without outputs and a general-path
job whose output sits in its own done row.
"""


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
