"""Where a 100 B output's cost lands in the running runtime, stage by stage.

Run as ``python -m benchmarks.output_cost [--quick] [--dsn DSN] [--out DIR]``.

``lifecycle`` shows that a 100 B output on every job costs a few percent at 64 workers and
about a tenth at 512. This benchmark splits that cost. Each variant's handler does one more
stage of the output path than the one before, on the same 1,024-value pool of 100 B
summaries ``lifecycle`` uses:

* ``encode``: ``storage.encode_output(value)``, the conversion and checks alone, result
  discarded (nothing is recorded);
* ``set_clear``: ``job.set_output(value)`` then ``job.clear_output()``: the slot too, but
  nothing reaches the completion;
* ``set``: ``job.set_output(value)``: the output is published with the completion (the
  ``lifecycle`` 100 B case).

Each variant runs right next to a no-output run (which goes first flips every round), and
each is reported as a paired ratio of run-phase jobs/s and as paired differences of client
and server CPU per job. Inserts are outside the timed window.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
)
from benchmarks._harness import (
    Connection,
    ServerCpu,
    Stat,
    Table,
    base_parser,
    command_line,
    embedded_or_dsn,
    machine_info,
    print_table,
    write_results,
)
from storage import Client, Job, encode_output

NAME = "output_cost"
OUTPUT_POOL = 1_024

Stage = Callable[[Job[Noop], object], object]


def _set_then_clear(job: Job[Noop], value: object) -> None:
    job.set_output(value)
    job.clear_output()


@dataclass(frozen=True, slots=True)
class Variant:
    key: str
    label: str
    stage: Stage


VARIANTS: tuple[Variant, ...] = (
    Variant("encode", "encode_output(value), discarded", lambda _job, value: encode_output(value)),
    Variant("set_clear", "job.set_output(value); job.clear_output()", _set_then_clear),
    Variant("set", "job.set_output(value), published", lambda job, value: job.set_output(value)),
)


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    jobs: int
    concurrencies: tuple[int, ...]


FULL = Plan(rounds=9, jobs=20_000, concurrencies=(64, 512))
QUICK = Plan(rounds=3, jobs=5_000, concurrencies=(512,))


@dataclass(frozen=True, slots=True)
class Run:
    jobs_per_s: float
    client_us: float
    server_us: float | None


async def run_once(
    conn: Connection,
    dsn: str,
    server: ServerCpu | None,
    stage: Stage | None,
    pool: list[Any],
    jobs: int,
    concurrency: int,
) -> Run:
    """Insert ``jobs`` jobs, then time the runtime draining them with ``stage`` as handler."""
    schema = await new_queue_schema(conn, "bench_oc")
    client = await Client.connect(dsn, schema)
    try:
        if stage is None:

            @client.task(Noop)
            async def noop(job: Job[Noop]) -> None:
                return None

        else:
            run_stage = stage

            @client.task(Noop)
            async def staged(job: Job[Noop]) -> None:
                run_stage(job, pool[job.args.i % len(pool)])

        await insert_all(client, [Noop(i) for i in range(jobs)])
        server_started = server.seconds() if server else None
        cpu_started = time.process_time()
        started = time.perf_counter()
        await client.run_until_idle(concurrency=concurrency, maintenance_interval=None)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        server_finished = server.seconds() if server else None
    finally:
        await client.close()
        await drop_queue_schema(conn, schema)
    server_us = (
        1e6 * (server_finished - server_started) / jobs
        if server_started is not None and server_finished is not None
        else None
    )
    return Run(jobs / elapsed, 1e6 * cpu / jobs, server_us)


@dataclass(frozen=True, slots=True)
class Pair:
    variant: str
    concurrency: int
    round: int
    baseline: Run
    measured: Run


async def measure(dsn: str, conn: Connection, plan: Plan, pool: list[Any]) -> list[Pair]:
    server = await ServerCpu.find(conn)
    await run_once(conn, dsn, server, None, pool, 1_000, plan.concurrencies[0])  # warm-up
    pairs: list[Pair] = []
    for round_no in range(plan.rounds):
        for concurrency in plan.concurrencies:
            for variant in VARIANTS:
                runs: dict[bool, Run] = {}  # keyed by "is the baseline"
                for baseline in (True, False) if round_no % 2 == 0 else (False, True):
                    stage = None if baseline else variant.stage
                    runs[baseline] = await run_once(
                        conn, dsn, server, stage, pool, plan.jobs, concurrency
                    )
                pair = Pair(variant.key, concurrency, round_no, runs[True], runs[False])
                pairs.append(pair)
                log(
                    f"round {round_no + 1}/{plan.rounds} c={concurrency:<4} {variant.key:<9}"
                    f" x none {pair.measured.jobs_per_s / pair.baseline.jobs_per_s:.3f}"
                    f" client {pair.measured.client_us - pair.baseline.client_us:+.1f} µs/job"
                )
    return pairs


@dataclass(frozen=True, slots=True)
class Summary:
    variant: Variant
    concurrency: int
    ratio: Stat
    client_delta: Stat
    server_delta: Stat | None
    baseline_client_us: Stat

    def as_row(self) -> dict[str, object]:
        return {
            "variant": self.variant.key,
            "label": self.variant.label,
            "concurrency": self.concurrency,
            "run_jobs_per_s_ratio": self.ratio,
            "client_cpu_us_delta_per_job": self.client_delta,
            "server_cpu_us_delta_per_job": self.server_delta,
            "baseline_client_cpu_us_per_job": self.baseline_client_us,
        }


def summarise(pairs: Sequence[Pair], plan: Plan) -> list[Summary]:
    out: list[Summary] = []
    for concurrency in plan.concurrencies:
        for variant in VARIANTS:
            mine = [p for p in pairs if p.variant == variant.key and p.concurrency == concurrency]
            servers = [(p.measured.server_us, p.baseline.server_us) for p in mine]
            known = [(m, b) for m, b in servers if m is not None and b is not None]
            out.append(
                Summary(
                    variant=variant,
                    concurrency=concurrency,
                    ratio=Stat.of(p.measured.jobs_per_s / p.baseline.jobs_per_s for p in mine),
                    client_delta=Stat.of(p.measured.client_us - p.baseline.client_us for p in mine),
                    server_delta=(
                        Stat.of(m - b for m, b in known) if len(known) == len(mine) else None
                    ),
                    baseline_client_us=Stat.of(p.baseline.client_us for p in mine),
                )
            )
    return out


def cost_table(summaries: Sequence[Summary], plan: Plan) -> Table:
    rows = tuple(
        (
            s.variant.label,
            f"{s.concurrency}",
            s.ratio.fmt(".3f"),
            s.client_delta.fmt("+.1f"),
            s.server_delta.fmt("+.1f") if s.server_delta else "—",
            s.baseline_client_us.fmt(".0f", spread=False),
        )
        for s in summaries
    )
    return Table(
        f"A 100 B output, stage by stage ({plan.jobs:,} jobs per run, {plan.rounds} rounds)",
        (
            "handler does",
            "workers",
            "run-phase jobs/s x none",
            "Δ client CPU µs/job",
            "Δ server CPU µs/job",
            "no-output client CPU µs/job",
        ),
        rows,
        caption=(
            "Each variant paired with the no-output run next to it (order flips every round); "
            "median (min..max) over rounds. Client CPU: process_time of this process over the "
            "run phase; server CPU: the PostgreSQL processes' CPU time from /proc."
        ),
    )


NOTES = """
## Reading it

The rows add one stage each. `encode` minus nothing is the conversion (orjson, the read-back
check, the Python calls around them) as it costs inside the runtime, where the pool's
values and the interpreter's caches are cold; `set_clear` minus `encode` is the slot;
`set` minus `set_clear` is everything after the handler: the executor's metric, the batch
split, asyncpg's `json[]` parameter and the server's part of the completion statement. On
a 2-core host whose speed moves with its neighbours, single rounds scatter by ±20 µs;
read the medians.
"""


def parse_args(argv: Sequence[str] | None = None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help=f"{QUICK.rounds} rounds of {QUICK.jobs:,} jobs at 512 workers (default"
        f" {FULL.rounds} rounds of {FULL.jobs:,} at 64 and 512)",
    )
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument("--seed", type=int, default=48, help="seed for output contents")
    return parser.parse_args(argv)


async def amain(args: Any) -> int:
    base = QUICK if args.quick else FULL
    plan = Plan(args.rounds or base.rounds, base.jobs, base.concurrencies)
    started = time.perf_counter()
    pool = output_values(SMALL, OUTPUT_POOL, args.seed)
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        await prepare(dsn)
        conn: Connection = await asyncpg.connect(dsn)
        try:
            machine = await machine_info(conn)
            pairs = await measure(dsn, conn, plan, pool)
        finally:
            await conn.close()
    summaries = summarise(pairs, plan)
    table = cost_table(summaries, plan)
    print_table(table)
    meta: dict[str, object] = {
        "command": command_line(NAME, sys.argv[1:]),
        "server": "external (--dsn)" if args.dsn else "embedded pgserver",
        "machine": machine,
        "config": {
            "quick": args.quick,
            "rounds": plan.rounds,
            "jobs_per_run": plan.jobs,
            "concurrencies": list(plan.concurrencies),
            "output_pool": OUTPUT_POOL,
            "seed": args.seed,
            "wall_seconds": round(time.perf_counter() - started, 1),
        },
    }
    files = write_results(
        args.out,
        NAME,
        [s.as_row() for s in summaries],
        meta,
        title="Where a 100 B output's cost lands",
        tables=(table,),
        notes=(NOTES,),
        extra={
            "pairs": [
                {
                    "variant": p.variant,
                    "concurrency": p.concurrency,
                    "round": p.round,
                    "baseline": p.baseline,
                    "measured": p.measured,
                }
                for p in pairs
            ]
        },
    )
    log(f"wrote {files.json} and {files.markdown} ({time.perf_counter() - started:.0f} s total)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
