"""The whole lifecycle against peer queues on one server: this engine at its defaults and
tuned, graphile-worker, pgqueuer, pg-boss and Oban for Python, interleaved, one fresh database
per run.

Each system installs its schema outside the measured window, then inserts N jobs and runs
them until drained; ratios are paired with our default run of the same round. Ours, pg-boss
and Oban record a 100 B output per job. pgqueuer needs ``pip install '.[bench]'``; pg-boss and
graphile-worker need ``node`` and ``npm`` (``npm ci`` into their ignored ``node_modules`` on
first use); Oban needs a Python 3.12+ (``$AWA_BENCH_PYTHON312``, the PATH or pyenv) to make
its ignored ``benchmarks/oban/.venv`` from ``requirements.txt``. A peer failing its warm-up is
skipped, with the reason in the table. Per run, CPU seconds of the client (this process, or
the peer's child process tree) and of every PostgreSQL process, from /proc.
"""

from __future__ import annotations

import asyncio
import importlib
import os
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
PGBOSS, GRAPHILE, OBAN = (Path(__file__).parent / name for name in ("pgboss", "graphile", "oban"))
PYENV = Path.home() / ".pyenv" / "versions"
Result = tuple[float, float, float]
"""Enqueue seconds, run seconds, the client's CPU seconds over both."""
Window = Callable[[], Awaitable[float]]
"""Opens the measured window (checkpoint, WAL position) and returns its start time."""


async def run_ours(dsn: str, window: Window, jobs: int, **options: Any) -> Result:
    from storage import Client, migrate

    await migrate(dsn)
    async with await Client.connect(dsn, "awa") as client:
        engine.register_handler(client, engine.output_values(engine.SMALL, 1_024, 0))
        started, cpu = await window(), time.process_time()
        await insert_all(client, [Noop(i) for i in range(jobs)])
        inserted = time.perf_counter()
        await client.run_until_idle(maintenance_interval=None, **options)
        done, cpu = time.perf_counter(), time.process_time() - cpu
        async with client.pool.acquire() as conn:
            completed = await conn.fetchval(
                "SELECT coalesce(sum(completed_count), 0) FROM awa.receipt_completion_batches"
            )
        if completed != jobs:
            raise AssertionError(f"ours completed {completed} of {jobs} jobs")
        return inserted - started, done - inserted, cpu


async def run_pgqueuer(dsn: str, window: Window, jobs: int, **options: Any) -> Result:
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
        started, cpu = await window(), time.process_time()
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
        done, cpu = time.perf_counter(), time.process_time() - cpu
        left = await conn.fetchval("SELECT count(*) FROM pgqueuer")
    finally:
        await conn.close()
    if left != 0 or handled != jobs:
        raise AssertionError(f"pgqueuer handled {handled} of {jobs}, {left} left queued")
    return inserted - started, done - inserted, cpu


def _npm_installed(folder: Path) -> None:
    """``npm ci`` into ``folder``'s ignored node_modules on first use (its package-lock pins it)."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        raise RuntimeError(f"node and npm are needed for {folder.name}")
    if not (folder / "node_modules").exists():
        install = [npm, "ci", "--no-audit", "--no-fund", "--silent"]
        subprocess.run(install, cwd=folder, check=True)


def _python_312() -> str:
    """A Python 3.12+ interpreter for Oban: ``$AWA_BENCH_PYTHON312``, then the PATH, then pyenv."""
    found = [
        os.environ.get("AWA_BENCH_PYTHON312", ""),
        *map(str, sorted(PYENV.glob("3.1*/bin/python"))),
    ]
    found[1:1] = [shutil.which(f"python3.{minor}") or "" for minor in (14, 13, 12)]
    for python in filter(None, found):
        check = [python, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
        if subprocess.run(check, capture_output=True).returncode == 0:
            return python
    raise RuntimeError("Oban needs Python 3.12+ and none was found (set AWA_BENCH_PYTHON312)")


def _oban_python() -> str:
    """``benchmarks/oban/.venv`` (ignored by git) with ``requirements.txt``, made on first use."""
    python = OBAN / ".venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([_python_312(), "-m", "venv", str(OBAN / ".venv")], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "-r", "requirements.txt"]
        subprocess.run(pip, cwd=OBAN, check=True)
    return str(python)


async def run_child(name: str, command: list[str], cwd: Path, window: Window, jobs: int) -> Result:
    """A peer in a child process (``pgboss/run.mjs``, ``graphile/run.mjs``, ``oban/run.py``):
    it prints "ready", waits for "go", and reports its own enqueue and run times; its CPU
    (the child and its children, /proc) is measured from "go" to its report."""
    child = await asyncio.create_subprocess_exec(*command, cwd=cwd, stdin=-1, stdout=-1)
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        if (await child.stdout.readline()).strip() != b"ready":
            raise RuntimeError(f"{name} did not start")
        tree = h.ServerCpu(child.pid)  # the child's process tree, as for a postmaster
        await window()
        cpu_started = tree.seconds()
        child.stdin.write(b"go\n")
        _, insert_s, run_s, completed = (await child.stdout.readline()).split()
        cpu = tree.seconds() - cpu_started
    finally:
        if child.returncode is None:
            child.kill()
        await child.wait()
    if int(completed) != jobs:
        raise AssertionError(f"{name} completed {completed.decode()} of {jobs} jobs")
    return float(insert_s), float(run_s), cpu


async def run_pgboss(dsn: str, window: Window, jobs: int, **o: Any) -> Result:
    """pg-boss 12.38 (``pgboss/run.mjs``): work() with a 100 B output per job."""
    await asyncio.to_thread(_npm_installed, PGBOSS)
    argv = ["node", "run.mjs", dsn, str(jobs), str(o["concurrency"]), str(o["batch"])]
    return await run_child("pg-boss", argv, PGBOSS, window, jobs)


async def run_graphile(dsn: str, window: Window, jobs: int, **o: Any) -> Result:
    """graphile-worker 0.18 (``graphile/run.mjs``) at its documented performance settings."""
    await asyncio.to_thread(_npm_installed, GRAPHILE)
    argv = [str(o[k]) for k in ("concurrency", "pool", "local_queue")]
    return await run_child(
        "graphile-worker", ["node", "run.mjs", dsn, str(jobs), *argv], GRAPHILE, window, jobs
    )


async def run_oban(dsn: str, window: Window, jobs: int, **o: Any) -> Result:
    """Oban for Python 0.7 (``oban/run.py``, Python 3.12+): a 100 B ``Record`` per job."""
    python = await asyncio.to_thread(_oban_python)
    argv = [python, "run.py", dsn, str(jobs), str(o["limit"])]
    return await run_child("Oban", argv, OBAN, window, jobs)


SYSTEMS: dict[str, tuple[Callable[..., Awaitable[Result]], dict[str, int]]] = {
    "ours, defaults (sized by the engine)": (run_ours, {}),
    "ours, old defaults (64 workers, claim 256)": (
        run_ours,
        {"concurrency": 64, "claim_size": 256},
    ),
    "ours, 512 workers, claim 512": (run_ours, {"concurrency": 512, "claim_size": 512}),
    "graphile-worker 0.18.0 (24 jobs, pool 25, local queue 500), no output": (
        run_graphile,
        {"concurrency": 24, "pool": 25, "local_queue": 500},
    ),
    "pgqueuer 1.6.0 (64 workers), no output": (run_pgqueuer, {"concurrency": 64}),
    "pg-boss 12.38 (4 workers x batch 256)": (run_pgboss, {"concurrency": 4, "batch": 256}),
    "Oban for Python 0.7.0 (limit 100), 100 B Record": (run_oban, {"limit": 100}),
}


async def one_run(admin: h.Connection, dsn: str, system: str, jobs: int, n: int) -> list[float]:
    """(enqueue s, run s, WAL bytes, client CPU s, server CPU s) of one run in a fresh
    database; the server's CPU is 0 when its processes are not visible here."""
    database = f"bench_peer_{n}"
    await admin.execute(f'CREATE DATABASE "{database}"')
    target = urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))
    lsn, server, server_started = "", await h.ServerCpu.find(admin), 0.0

    async def window() -> float:
        nonlocal lsn, server_started
        await h.checkpoint(admin)
        lsn = await h.wal_lsn(admin)
        server_started = server.seconds() if server else 0.0
        return time.perf_counter()

    try:
        run, options = SYSTEMS[system]
        insert_s, run_s, cpu = await asyncio.wait_for(run(target, window, jobs, **options), 600)
        server_cpu = server.seconds() - server_started if server else 0.0
        return [insert_s, run_s, await h.wal_bytes_since(admin, lsn), cpu, server_cpu]
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


QUICK_HELP = "2 rounds of 2,000 jobs (default 3 rounds of 20,000)"
ROUNDS = True
OPTIONS = {
    "--jobs": {"type": int},
    "--systems": {"help": "comma-separated words: only the systems whose name holds one"},
}


def chosen(words: str | None) -> list[str]:
    """The systems to run: all, or those whose name holds one of ``words`` (ours first)."""
    wanted = [w.strip().lower() for w in (words or "").split(",") if w.strip()]
    names = [s for s in SYSTEMS if not wanted or any(w in s.lower() for w in wanted)]
    return names if names and names[0] == next(iter(SYSTEMS)) else [next(iter(SYSTEMS)), *names]


def cost_rows(runs: dict[str, list[list[float]]], jobs: int) -> list[tuple[str, ...]]:
    """Client and server CPU per job and the lifecycle over the machine's CPU bound, which is
    cores / (client + server CPU per job): the share of the cores the run kept busy."""
    cores = os.cpu_count() or 1
    rows: list[tuple[str, ...]] = []
    for system, mine in runs.items():
        client = h.Stat.of(1e6 * c / jobs for *_, c, _ in mine)
        server = h.Stat.of(1e6 * s / jobs for *_, s in mine)
        bound = h.Stat.of((c + s) / (cores * (i + r)) for i, r, _, c, s in mine)
        total = h.Stat.of(1e6 * (c + s) / jobs for *_, c, s in mine)
        rows.append((system, client.fmt(), server.fmt(), total.fmt(), bound.fmt(".2f")))
    return rows


async def amain(args: Any) -> int:
    rounds = args.rounds or (2 if args.quick else 3)
    jobs = args.jobs or (2_000 if args.quick else 20_000)
    runs: dict[str, list[list[float]]] = {}
    skipped: dict[str, str] = {}
    async with h.embedded_or_dsn(args.dsn, log=log) as dsn:
        admin: h.Connection = await asyncpg.connect(dsn)
        try:
            machine = await h.machine_info(admin)
            for n, system in enumerate(chosen(args.systems)):  # warm-up; failing it skips
                try:
                    await one_run(admin, dsn, system, 500, n)
                    runs[system] = []
                except Exception as exc:  # reported in the table, never fatal
                    skipped[system] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                    log(f"skipped {system}: {skipped[system]}")
            for round_no in range(rounds):
                for system in h.rotate(list(runs), round_no):
                    runs[system].append(await one_run(admin, dsn, system, jobs, 100 + round_no))
                    i, r, *_ = runs[system][-1]
                    log(f"round {round_no + 1}/{rounds} {system}: {jobs / (i + r):,.0f} jobs/s")
        finally:
            await admin.close()
    first = next(iter(SYSTEMS))
    rows: list[tuple[str, ...]] = [(s, *"-----", f"skipped: {why}") for s, why in skipped.items()]
    life = {s: [jobs / (i + r) for i, r, *_ in m] for s, m in runs.items()}
    run_rate = {s: [jobs / r for _, r, *_ in m] for s, m in runs.items()}
    wal = {s: [w / jobs for _, _, w, *_ in m] for s, m in runs.items()}
    for system, mine in runs.items():
        cells = [h.Stat.of(jobs / i for i, *_ in mine), h.Stat.of(run_rate[system])]
        cells += [h.Stat.of(life[system]), h.Stat.paired_ratio(life[first], life[system])]
        cells += [h.Stat.paired_ratio(run_rate[first], run_rate[system])]
        cells += [h.Stat.of(wal[system]), h.Stat.paired_ratio(wal[system], wal[first])]
        rows.append(
            (system, *(c.fmt(".2f") if n in (3, 4, 6) else c.fmt() for n, c in enumerate(cells)))
        )
    header = "system | enqueue jobs/s | run jobs/s | lifecycle jobs/s | ours default ÷ it"
    header += " | run: ours default ÷ it | WAL B/job | WAL x ours default"
    cost = "system | client CPU µs/job | server CPU µs/job | total µs/job | lifecycle ÷ CPU bound"
    tables = [
        h.Table(
            f"Whole lifecycle against peers, 100 B output per job: {jobs:,} jobs, {rounds} rounds",
            h.columns(header),
            tuple(rows),
            caption="ratios paired per round; lifecycle = jobs / (enqueue + run).",
        ),
        h.Table(
            "CPU per job, enqueue and run (client: this process or the peer's child tree)",
            h.columns(cost),
            tuple(cost_rows(runs, jobs)),
            caption=f"CPU bound = {os.cpu_count()} cores / total CPU per job; the ratio is the "
            "share of the cores the lifecycle kept busy (server: every PostgreSQL process).",
        ),
    ]
    meta = {"machine": machine, "rounds": rounds, "jobs": jobs, "skipped": skipped}
    key = "insert_s_run_s_wal_client_cpu_s_server_cpu_s"
    data = [{"system": system, key: mine} for system, mine in runs.items()]
    return h.report(args, NAME, data, meta, title="Peers", tables=tables)
