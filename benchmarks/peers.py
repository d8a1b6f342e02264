"""The whole lifecycle against peer queues on one server: this engine at its defaults and
tuned, pgqueuer and pg-boss, interleaved, one fresh database per run.

Each system installs its schema outside the measured window, then inserts N jobs and runs
them until drained; ratios are paired with our default run of the same round. Ours and
pg-boss record a 100 B output per job. pgqueuer needs ``pip install '.[bench]'``; pg-boss
needs ``node`` and ``npm`` (``npm ci`` on first use). A peer failing its warm-up is skipped.
"""

from __future__ import annotations

import asyncio
import importlib
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from benchmarks import _engine as engine
from benchmarks import _harness as h
from benchmarks._engine import INSERT_BATCH, Noop, insert_all, log

NAME = "peers"
PGBOSS = Path(__file__).parent / "pgboss"
Window = Callable[[], Awaitable[float]]
"""Opens the measured window (checkpoint, WAL position) and returns its start time."""


async def run_ours(dsn: str, window: Window, jobs: int, **options: Any) -> tuple[float, float]:
    from storage import Client, migrate

    await migrate(dsn)
    async with await Client.connect(dsn, "awa") as client:
        engine.register_handler(client, engine.output_values(engine.SMALL, 1_024, 0))
        started = await window()
        await insert_all(client, [Noop(i) for i in range(jobs)])
        inserted = time.perf_counter()
        await client.run_until_idle(maintenance_interval=None, **options)
        done = time.perf_counter()
        async with client.pool.acquire() as conn:
            completed = await conn.fetchval(
                "SELECT coalesce(sum(completed_count), 0) FROM awa.receipt_completion_batches"
            )
        if completed != jobs:
            raise AssertionError(f"ours completed {completed} of {jobs} jobs")
        return inserted - started, done - inserted


async def run_pgqueuer(dsn: str, window: Window, jobs: int, **options: Any) -> tuple[float, float]:
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
        started = await window()
        for start in range(0, jobs, INSERT_BATCH):
            n = min(jobs, start + INSERT_BATCH) - start
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
        inserted = time.perf_counter()
        workers = options["concurrency"]
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
    return inserted - started, done - inserted


async def run_pgboss(dsn: str, window: Window, jobs: int, **options: Any) -> tuple[float, float]:
    """pg-boss in a Node child (``pgboss/run.mjs``): it reports its own enqueue and run times."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError("node and npm are needed for pg-boss")
    if not (PGBOSS / "node_modules").exists():
        install = [npm, "ci", "--no-audit", "--no-fund"]
        await asyncio.to_thread(subprocess.run, install, cwd=PGBOSS, check=True)
    argv = [str(options[k]) for k in ("concurrency", "batch")]
    child = await asyncio.create_subprocess_exec(
        node, "run.mjs", dsn, str(jobs), *argv, cwd=PGBOSS, stdin=-1, stdout=-1
    )
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        if (await child.stdout.readline()).strip() != b"ready":
            raise RuntimeError("pg-boss did not start")
        await window()
        child.stdin.write(b"go\n")
        _, insert_s, run_s, completed = (await child.stdout.readline()).split()
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
    if int(completed) != jobs:
        raise AssertionError(f"pg-boss completed {completed.decode()} of {jobs} jobs")
    return float(insert_s), float(run_s)


SYSTEMS: dict[str, tuple[Callable[..., Awaitable[tuple[float, float]]], dict[str, int]]] = {
    "ours, defaults (sized by the engine)": (run_ours, {}),
    "ours, old defaults (64 workers, claim 256)": (
        run_ours,
        {"concurrency": 64, "claim_size": 256},
    ),
    "ours, 512 workers, claim 512": (run_ours, {"concurrency": 512, "claim_size": 512}),
    "pgqueuer 1.6.0 (64 workers), no output": (run_pgqueuer, {"concurrency": 64}),
    "pg-boss 12.38 (4 workers x batch 256)": (run_pgboss, {"concurrency": 4, "batch": 256}),
}


async def one_run(admin: h.Connection, dsn: str, system: str, jobs: int, n: int) -> list[float]:
    """(enqueue s, run s, WAL bytes) of one run in a fresh database."""
    database = f"bench_peer_{n}"
    await admin.execute(f'CREATE DATABASE "{database}"')
    target = urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))
    lsn = ""

    async def window() -> float:
        nonlocal lsn
        await h.checkpoint(admin)
        lsn = await h.wal_lsn(admin)
        return time.perf_counter()

    try:
        run, options = SYSTEMS[system]
        insert_s, run_s = await asyncio.wait_for(run(target, window, jobs, **options), 600)
        return [insert_s, run_s, await h.wal_bytes_since(admin, lsn)]
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


QUICK_HELP = "2 rounds of 2,000 jobs (default 3 rounds of 20,000)"
ROUNDS = True
OPTIONS = {"--jobs": {"type": int}}


async def amain(args: Any) -> int:
    rounds = args.rounds or (2 if args.quick else 3)
    jobs = args.jobs or (2_000 if args.quick else 20_000)
    runs: dict[str, list[list[float]]] = {}
    skipped: dict[str, str] = {}
    async with h.embedded_or_dsn(args.dsn, log=log) as dsn:
        admin: h.Connection = await asyncpg.connect(dsn)
        try:
            machine = await h.machine_info(admin)
            for n, system in enumerate(SYSTEMS):  # warm-up; a peer that fails it is skipped
                try:
                    await one_run(admin, dsn, system, 500, n)
                    runs[system] = []
                except Exception as exc:  # reported in the table, never fatal
                    skipped[system] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            for round_no in range(rounds):
                for system in h.rotate(list(runs), round_no):
                    runs[system].append(await one_run(admin, dsn, system, jobs, 100 + round_no))
                    i, r, _ = runs[system][-1]
                    log(f"round {round_no + 1}/{rounds} {system}: {jobs / (i + r):,.0f} jobs/s")
        finally:
            await admin.close()
    first = next(iter(SYSTEMS))
    rows: list[tuple[str, ...]] = [(s, *"-----", f"skipped: {why}") for s, why in skipped.items()]
    life = {s: [jobs / (i + r) for i, r, _ in m] for s, m in runs.items()}
    wal = {s: [w / jobs for _, _, w in m] for s, m in runs.items()}
    for system, mine in runs.items():
        cells = [h.Stat.of(jobs / i for i, _, _ in mine), h.Stat.of(jobs / r for _, r, _ in mine)]
        cells += [h.Stat.of(life[system]), h.Stat.paired_ratio(life[system], life[first])]
        cells += [h.Stat.of(wal[system]), h.Stat.paired_ratio(wal[system], wal[first])]
        rows.append(
            (system, *(c.fmt(".2f") if n in (3, 5) else c.fmt() for n, c in enumerate(cells)))
        )
    header = "system | enqueue jobs/s | run jobs/s | lifecycle jobs/s | x ours default | WAL B/job"
    table = h.Table(
        f"Whole lifecycle against peers, 100 B output per job: {jobs:,} jobs, {rounds} rounds",
        h.columns(header + " | WAL x ours default"),
        tuple(rows),
    )
    meta = {"machine": machine, "rounds": rounds, "jobs": jobs, "skipped": skipped}
    data = [{"system": system, "insert_s_run_s_wal": mine} for system, mine in runs.items()]
    return h.report(args, NAME, data, meta, title="Peers", tables=[table])
