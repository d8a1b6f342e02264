"""Callback completions per second over HTTP, with and without a 100 B output.

A real ``awa-tui serve`` process completes jobs parked by the real runtime, posted over
keep-alive connections, every answer checked; for reference, the same completions as Python
calls (``complete_external``). The variants take turns in rotating order; ratios are paired.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from asyncio.subprocess import DEVNULL, PIPE
from typing import Any

import httpx

from benchmarks import _engine, _harness
from benchmarks._harness import Stat, Table, report
from storage import Client, Job, JobState, WaitForCallback

NAME = "http_completions"
TOKEN = "benchmark-token"
VARIANTS = (  # label, over HTTP, with an output
    ("HTTP, no output", True, False),
    ("HTTP, 100 B output", True, True),
    ("Python call, no output (no HTTP)", False, False),
)
Rates = list[list[float]]


async def park(client: Client, jobs: int) -> list[str]:
    """``jobs`` jobs waiting for a callback, parked by the real runtime; their callback ids."""

    @client.task(kind="hook")
    async def wait(job: Job[Any]) -> WaitForCallback:
        return WaitForCallback(await job.register_callback(timeout_seconds=3600))

    await _engine.insert_all(client, [{"n": n} for n in range(jobs)], kind="hook")
    await client.run_until_idle(maintenance_interval=None)
    page = await client.list_jobs(state=JobState.WAITING_EXTERNAL, limit=jobs)
    ids = [row.callback.callback_id for row in page if row.callback is not None]
    if len(ids) != jobs:
        raise AssertionError(f"{len(ids)} of {jobs} jobs parked")
    return ids


async def start_server(dsn: str, schema: str) -> tuple[asyncio.subprocess.Process, str]:
    """``awa-tui serve`` on a free port; the process and its URL."""
    argv = [*["-m", "awa_tui", "serve", "--port", "0", "--schema"], schema, "--dsn", dsn]
    env = {**os.environ, "AWA_API_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, *argv, env=env, stdout=PIPE, stderr=DEVNULL
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    if not line.startswith("awa-tui: serving "):
        raise RuntimeError(f"awa-tui serve did not start: {line!r}")
    return process, line.split()[2]


QUICK_HELP = "3 rounds x 150 completions per variant (default 5 x 400)"
OPTIONS = {"--concurrency": {"type": int, "default": 8, "help": "calls in flight"}}


def cpu_seconds(pid: int | None) -> float:
    """CPU time of process ``pid`` (the server), or of this one."""
    fields = None if pid is None else _harness._proc_stat(pid)
    if fields is None:
        return time.process_time()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    client: Client, dsn: str, schema: str, rounds: int, per_round: int, width: int, seed: int
) -> tuple[Rates, Rates]:
    """Per variant and round (``width`` calls in flight; round 0 warms up): completions/s,
    and CPU ms per completion of the completing process (``serve``, or this one)."""
    outputs = _engine.output_values(_engine.SMALL, 256, seed)
    rates: Rates = [[] for _ in VARIANTS]
    cpu: Rates = [[] for _ in VARIANTS]
    ids = await park(client, (rounds + 1) * per_round * len(VARIANTS))
    process, url = await start_server(dsn, schema)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers) as http:

            async def complete(pending: list[str], via_http: bool, output: bool) -> None:
                while pending:
                    value = outputs[len(pending) % len(outputs)] if output else None
                    if not via_http:
                        await client.complete_external(pending.pop(), output=value)
                        continue
                    answer = await http.post(
                        f"/api/callbacks/{pending.pop()}/complete",
                        json={"output": value} if output else {},
                    )
                    if answer.status_code != 200 or answer.json()["has_output"] != output:
                        raise AssertionError(f"{answer.status_code}: {answer.text[:200]}")

            for round_no in range(rounds + 1):
                for v in _harness.rotate(range(len(VARIANTS)), round_no):
                    batch, ids = ids[:per_round], ids[per_round:]
                    pid = process.pid if VARIANTS[v][1] else None
                    started, cpu_started = time.perf_counter(), cpu_seconds(pid)
                    await asyncio.gather(*(complete(batch, *VARIANTS[v][1:]) for _ in range(width)))
                    if round_no:
                        rates[v].append(per_round / (time.perf_counter() - started))
                        cpu[v].append((cpu_seconds(pid) - cpu_started) * 1000 / per_round)
    finally:
        process.terminate()
        await process.wait()
    return rates, cpu


async def amain(args: Any) -> int:
    rounds, per_round = (3, 150) if args.quick else (5, 400)
    async with (
        _engine.session(args.dsn) as (dsn, conn, machine),
        _engine.queue_schema(conn, dsn, "bench_http") as (schema, client),
    ):
        width = args.concurrency
        rates, cpu = await measure(client, dsn, schema, rounds, per_round, width, args.seed)
    rows, data = [], []
    for (label, _, _), r, c in zip(VARIANTS, rates, cpu, strict=True):
        ratio = Stat.paired_ratio(r, rates[0]).fmt(".2f")
        rows.append((label, Stat.of(r).fmt(), ratio, Stat.of(c).fmt(".2f")))
        data.append({"variant": label, "rates": r, "cpu_ms": c})
    table = Table(
        f"Callback completions/s ({rounds} rounds x {per_round}, {args.concurrency} in flight)",
        ("variant", "completions/s", "x HTTP no output, paired", "CPU ms/completion"),
        tuple(rows),
        caption="CPU: the completing process (the `awa-tui serve` process, or the benchmark's "
        "own for Python calls); PostgreSQL not included.",
    )
    meta = {"machine": machine, "rounds": rounds, "per_round": per_round, "concurrency": width}
    return report(args, NAME, data, meta, title="HTTP completions", tables=[table])
