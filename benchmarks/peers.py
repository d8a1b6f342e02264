"""The whole-lifecycle no-op benchmark against peer queues on the same server.

Run as ``python -m benchmarks.peers --peers [--quick] [--dsn DSN] [--out DIR]``.

Optional: the peers are not dependencies of this project and the test suite never needs
them. Install them into the environment only to run this
(``pip install pgqueuer procrastinate "psycopg[binary,pool]" awa-pg``); a peer that does not
import is reported as skipped with the reason. ``--peers`` is required so that running
every module by accident never tries to use them.

Each run gets its own database (``CREATE DATABASE``; the peers' schemas, including Awa's
own ``awa`` schema, would otherwise collide with ours), installs the queue there outside
the measured window, then: CHECKPOINT, WAL position, insert N no-op jobs in batches of
2,000, run them to completion with the peer's own worker at the given concurrency, WAL
position. jobs/s = N / (insert + run time); WAL/job over the same window. Rounds rotate
the order of the systems; each peer's jobs/s and WAL/job is divided by ours from the same
round.

* **ours** (``storage``): ``Client.insert_many`` + ``run_until_idle``, compact path.
* **procrastinate**: ``task.batch_defer_async`` + ``App.run_worker_async(wait=False)``
  (returns when no job is left); psycopg pool of one connection per worker (procrastinate
  fetches and finishes each job in its own transaction).
* **pgqueuer**: ``Queries.enqueue`` (lists) + ``PgQueuer.run(mode=drain)`` with
  ``max_concurrent_tasks`` = workers and ``batch_size`` = workers / 2, on one asyncpg
  connection as its README shows.
* **awa-pg** (Awa's Python SDK over its Rust core): ``migrate`` + ``install_queue_storage``
  outside the window, ``enqueue_many_copy`` + ``start([("default", workers)])``; the
  window ends when the handler has run N times and ``shutdown()`` (which drains in-flight
  completions) has returned. Its unix-socket DSN gets a ``localhost`` host for sqlx.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from benchmarks._engine import INSERT_BATCH, Noop, log
from benchmarks._harness import (
    Connection,
    Stat,
    Table,
    base_parser,
    checkpoint,
    command_line,
    embedded_or_dsn,
    machine_info,
    print_table,
    wal_bytes_since,
    wal_lsn,
    write_results,
)

NAME = "peers"
RUN_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    jobs: int
    concurrency: int


FULL = Plan(rounds=3, jobs=10_000, concurrency=64)
QUICK = Plan(rounds=2, jobs=2_000, concurrency=64)


def dsn_for_database(dsn: str, database: str) -> str:
    """The same server, another database (URL or key=value DSN)."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        return urlunsplit(parts._replace(path=f"/{database}"))
    kept = [p for p in dsn.split() if not p.startswith("dbname=")]
    return " ".join([*kept, f"dbname={database}"])


@dataclass(slots=True)
class Timing:
    insert_seconds: float
    run_seconds: float


@dataclass(slots=True)
class Window:
    """Marks the measured window inside a runner: after install, before the first insert."""

    conn: Connection
    lsn: str = ""
    started: float = 0.0

    async def open(self) -> None:
        await checkpoint(self.conn)
        self.lsn = await wal_lsn(self.conn)
        self.started = time.perf_counter()


# --------------------------------------------------------------------------------------
# Runners. Each: install outside the window, open it, insert, run to completion.
# --------------------------------------------------------------------------------------


async def run_ours(dsn: str, window: Window, jobs: int, workers: int) -> Timing:
    from storage import Client, Job, migrate

    await migrate(dsn)
    client = await Client.connect(dsn, "awa")
    try:

        @client.task(Noop)
        async def noop(job: Job[Noop]) -> None:
            return None

        await window.open()
        args = [Noop(i) for i in range(jobs)]
        for start in range(0, jobs, INSERT_BATCH):
            await client.insert_many(args[start : start + INSERT_BATCH])
        inserted = time.perf_counter()
        await client.run_until_idle(concurrency=workers, maintenance_interval=None)
        done = time.perf_counter()
        async with client.pool.acquire() as conn:
            completed = await conn.fetchval(
                "SELECT coalesce(sum(completed_count), 0) FROM receipt_completion_batches"
            )
        if completed != jobs:
            raise AssertionError(f"ours completed {completed} of {jobs}")
        return Timing(inserted - window.started, done - inserted)
    finally:
        await client.close()


async def run_procrastinate(dsn: str, window: Window, jobs: int, workers: int) -> Timing:
    procrastinate: Any = importlib.import_module("procrastinate")
    # One connection per concurrent job: procrastinate fetches and finishes each job in its
    # own transaction, so a smaller pool would throttle it below its design.
    connector = procrastinate.PsycopgConnector(conninfo=dsn, min_size=1, max_size=workers)
    app = procrastinate.App(connector=connector)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()

        async def noop(i: int) -> None:
            return None

        task = app.task(name="noop")(noop)
        await window.open()
        for start in range(0, jobs, INSERT_BATCH):
            await task.batch_defer_async(
                *({"i": i} for i in range(start, min(jobs, start + INSERT_BATCH)))
            )
        inserted = time.perf_counter()
        await app.run_worker_async(
            concurrency=workers, wait=False, listen_notify=False, install_signal_handlers=False
        )
        done = time.perf_counter()
    check = await asyncpg.connect(dsn)
    try:
        succeeded = await check.fetchval(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        )
    finally:
        await check.close()
    if succeeded != jobs:
        raise AssertionError(f"procrastinate succeeded {succeeded} of {jobs}")
    return Timing(inserted - window.started, done - inserted)


async def run_pgqueuer(dsn: str, window: Window, jobs: int, workers: int) -> Timing:
    pgqueuer: Any = importlib.import_module("pgqueuer")
    types: Any = importlib.import_module("pgqueuer.types")
    conn = await asyncpg.connect(dsn)
    try:
        driver = pgqueuer.AsyncpgDriver(conn)
        queries = pgqueuer.Queries(driver)
        await queries.install()
        pgq = pgqueuer.PgQueuer(driver)
        handled = 0

        async def noop(job: Any) -> None:
            nonlocal handled
            handled += 1

        pgq.entrypoint("noop")(noop)

        await window.open()
        for start in range(0, jobs, INSERT_BATCH):
            n = min(jobs, start + INSERT_BATCH) - start
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
        inserted = time.perf_counter()
        await pgq.run(
            mode=types.QueueExecutionMode.drain,
            batch_size=max(1, workers // 2),
            max_concurrent_tasks=workers,
        )
        done = time.perf_counter()
        left = await conn.fetchval("SELECT count(*) FROM pgqueuer")
    finally:
        await conn.close()
    if left != 0 or handled != jobs:
        raise AssertionError(f"pgqueuer handled {handled} of {jobs}, {left} left queued")
    return Timing(inserted - window.started, done - inserted)


def sqlx_dsn(dsn: str) -> str:
    """Awa's Rust driver (sqlx) refuses a URL with an empty host; a unix-socket DSN such as
    pgserver's ``postgresql://postgres:@/db?host=/tmp/x`` gets ``localhost``, which the
    ``host`` query parameter then overrides with the socket directory."""
    if "://" not in dsn:
        return dsn
    parts = urlsplit(dsn)
    if parts.hostname:
        return dsn
    user = parts.username or ""
    auth = f"{user}:{parts.password}@" if parts.password else (f"{user}@" if user else "")
    return urlunsplit(parts._replace(netloc=f"{auth}localhost"))


async def run_awa(dsn: str, window: Window, jobs: int, workers: int) -> Timing:
    awa: Any = importlib.import_module("awa")
    client = awa.AsyncClient(sqlx_dsn(dsn), max_connections=10)
    try:
        await client.migrate()
        await client.install_queue_storage()
        handled = 0
        all_handled = asyncio.Event()

        async def noop(job: Any) -> None:
            nonlocal handled
            handled += 1
            if handled >= jobs:
                all_handled.set()

        client.task(Noop)(noop)

        await window.open()
        args = [Noop(i) for i in range(jobs)]
        for start in range(0, jobs, INSERT_BATCH):
            await client.enqueue_many_copy(args[start : start + INSERT_BATCH])
        inserted = time.perf_counter()
        await client.start([("default", workers)], poll_interval_ms=50)
        await all_handled.wait()
        # shutdown() stops claiming and drains in-flight completions; only then is every
        # completion committed, so the window ends after it (its fixed cost included).
        await client.shutdown()
        done = time.perf_counter()
    finally:
        await client.close()
    if handled != jobs:
        raise AssertionError(f"awa-pg handled {handled} of {jobs}")
    return Timing(inserted - window.started, done - inserted)


@dataclass(frozen=True, slots=True)
class System:
    key: str
    label: str
    module: str | None
    run: Callable[[str, Window, int, int], Awaitable[Timing]]


SYSTEMS: tuple[System, ...] = (
    System("ours", "ours (storage, compact path)", None, run_ours),
    System("procrastinate", "procrastinate", "procrastinate", run_procrastinate),
    System("pgqueuer", "pgqueuer", "pgqueuer", run_pgqueuer),
    System("awa", "awa-pg (Awa Python SDK, Rust core)", "awa", run_awa),
)


def version_of(module: str) -> str:
    from importlib import metadata

    dist = {"awa": "awa-pg"}.get(module, module)
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


@dataclass(slots=True)
class Sample:
    system: str
    round: int
    jobs: int
    timing: Timing
    wal: int

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / (self.timing.insert_seconds + self.timing.run_seconds)

    @property
    def wal_per_job(self) -> float:
        return self.wal / self.jobs


_db_ids = iter(range(1, 1_000_000))


async def one_run(
    admin: Connection, dsn: str, system: System, jobs: int, workers: int, round_no: int
) -> Sample:
    database = f"bench_peer_{system.key}_{next(_db_ids)}"
    await admin.execute(f'CREATE DATABASE "{database}"')
    try:
        window = Window(admin)
        timing = await asyncio.wait_for(
            system.run(dsn_for_database(dsn, database), window, jobs, workers), RUN_TIMEOUT
        )
        wal = await wal_bytes_since(admin, window.lsn)
        return Sample(system.key, round_no, jobs, timing, wal)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


async def measure(
    admin: Connection, dsn: str, plan: Plan, systems: Sequence[System]
) -> tuple[list[Sample], dict[str, str]]:
    failed: dict[str, str] = {}
    usable: list[System] = []
    for system in systems:
        if system.module is not None:
            try:
                importlib.import_module(system.module)
            except ImportError as exc:
                failed[system.key] = f"not installed: {exc}"
                continue
        try:
            await one_run(admin, dsn, system, min(500, plan.jobs), plan.concurrency, -1)
        except Exception as exc:  # a peer that cannot be made to work is reported, not fatal
            failed[system.key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log(f"{system.key}: warm-up failed\n{traceback.format_exc()}")
            continue
        usable.append(system)
    samples: list[Sample] = []
    for round_no in range(plan.rounds):
        shift = round_no % max(1, len(usable))
        for system in usable[shift:] + usable[:shift]:
            if system.key in failed:
                continue
            try:
                sample = await one_run(admin, dsn, system, plan.jobs, plan.concurrency, round_no)
            except Exception as exc:
                failed[system.key] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                log(f"{system.key}: run failed\n{traceback.format_exc()}")
                continue
            samples.append(sample)
            log(
                f"round {round_no + 1}/{plan.rounds} {system.key:<14}"
                f" {sample.jobs_per_s:8,.0f} jobs/s (insert {sample.timing.insert_seconds:.1f} s,"
                f" run {sample.timing.run_seconds:.1f} s) {sample.wal_per_job:7,.0f} B WAL/job"
            )
    return samples, failed


def results_table(
    samples: Sequence[Sample], failed: dict[str, str], plan: Plan
) -> tuple[Table, list[dict[str, object]]]:
    ours = {s.round: s for s in samples if s.system == "ours"}
    rows = []
    data: list[dict[str, object]] = []
    for system in SYSTEMS:
        mine = sorted((s for s in samples if s.system == system.key), key=lambda s: s.round)
        version = "—" if system.module is None else version_of(system.module)
        if not mine and system.key not in failed:
            continue  # not selected (--only)
        if system.key in failed and not mine:
            rows.append(
                (system.label, version, "—", "—", "—", "—", f"skipped: {failed[system.key]}")
            )
            data.append({"system": system.key, "skipped": failed[system.key]})
            continue
        paired = [s for s in mine if s.round in ours]
        jobs = Stat.of(s.jobs_per_s for s in mine)
        wal = Stat.of(s.wal_per_job for s in mine)
        ratio = Stat.paired_ratio(
            [s.jobs_per_s for s in paired], [ours[s.round].jobs_per_s for s in paired]
        )
        wal_ratio = Stat.paired_ratio(
            [s.wal_per_job for s in paired], [ours[s.round].wal_per_job for s in paired]
        )
        insert = Stat.of(s.jobs / s.timing.insert_seconds for s in mine)
        rows.append(
            (
                system.label,
                version,
                jobs.fmt(),
                ratio.fmt(".2f"),
                wal.fmt(),
                wal_ratio.fmt(".2f"),
                f"insert {insert.median:,.0f} jobs/s"
                + (f"; {failed[system.key]}" if system.key in failed else ""),
            )
        )
        data.append(
            {
                "system": system.key,
                "version": version,
                "jobs_per_s": jobs,
                "jobs_per_s_over_ours": ratio,
                "wal_bytes_per_job": wal,
                "wal_over_ours": wal_ratio,
                "insert_jobs_per_s": insert,
            }
        )
    table = Table(
        f"Whole lifecycle, no-op handler: {plan.jobs:,} jobs, {plan.concurrency} workers,"
        f" {plan.rounds} rounds",
        (
            "system",
            "version",
            "jobs/s (min..max)",
            "÷ ours, paired",
            "WAL B/job",
            "WAL ÷ ours",
            "notes",
        ),
        tuple(rows),
        caption=(
            "Same embedded server, one database per run, same job count and worker count; "
            "jobs/s = N / (insert + run). Ratios are to our run in the same round."
        ),
        align=("l", "l", "r", "r", "r", "r", "l"),
    )
    return table, data


def parse_args(argv: Sequence[str] | None = None) -> Any:
    parser = base_parser(
        NAME,
        __doc__.split("\n", 1)[0] if __doc__ else None,
        quick_help=f"{QUICK.rounds} rounds of {QUICK.jobs:,} jobs (default {FULL.rounds} of"
        f" {FULL.jobs:,})",
    )
    parser.add_argument(
        "--peers", action="store_true", help="required: confirm the peers are installed to run"
    )
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--concurrency", type=int, help=f"workers (default {FULL.concurrency})")
    parser.add_argument(
        "--only", action="append", choices=[s.key for s in SYSTEMS], help="run only these"
    )
    args = parser.parse_args(argv)
    if not args.peers:
        parser.error(
            "this benchmark needs the optional peers (pip install pgqueuer procrastinate "
            '"psycopg[binary,pool]" awa-pg); pass --peers to run it'
        )
    return args


async def amain(args: Any) -> int:
    base = QUICK if args.quick else FULL
    plan = Plan(
        rounds=args.rounds or base.rounds,
        jobs=args.jobs or base.jobs,
        concurrency=args.concurrency or base.concurrency,
    )
    systems = [s for s in SYSTEMS if not args.only or s.key in args.only or s.key == "ours"]
    started = time.perf_counter()
    async with embedded_or_dsn(args.dsn, log=log) as dsn:
        admin: Connection = await asyncpg.connect(dsn)
        try:
            machine = await machine_info(admin)
            samples, failed = await measure(admin, dsn, plan, systems)
        finally:
            await admin.close()
    table, data = results_table(samples, failed, plan)
    print_table(table)
    meta: dict[str, object] = {
        "command": command_line(NAME, sys.argv[1:]),
        "server": "external (--dsn)" if args.dsn else "embedded pgserver",
        "machine": machine,
        "config": {
            "quick": args.quick,
            "rounds": plan.rounds,
            "jobs_per_run": plan.jobs,
            "workers": plan.concurrency,
            "wall_seconds": round(time.perf_counter() - started, 1),
        },
        "skipped": failed or "none",
    }
    files = write_results(
        args.out,
        NAME,
        data,
        meta,
        title="Whole lifecycle against peer queues",
        tables=(table,),
        notes=(__doc__.split("\n\n", 3)[3] if __doc__ else "",),
        extra={
            "runs": [
                {
                    "system": s.system,
                    "round": s.round,
                    "jobs": s.jobs,
                    "insert_seconds": s.timing.insert_seconds,
                    "run_seconds": s.timing.run_seconds,
                    "jobs_per_s": s.jobs_per_s,
                    "wal_bytes": s.wal,
                }
                for s in samples
            ]
        },
    )
    log(f"wrote {files.json} and {files.markdown} ({time.perf_counter() - started:.0f} s total)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(amain(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
