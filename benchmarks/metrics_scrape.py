"""One ``GET /metrics`` scrape's time, at 10k and 1M jobs (target: under 50 ms).

The jobs are spread over 8 queues: 70% available, 10% scheduled for later, 20% completed by
the real runtime in the hour before the scrape (so the read's history part has work). Each
size is scraped through the real app in process (httpx over ASGI, no socket) as ``serve``
answers it (the queue gauges) and as a worker's metrics port does (the gauges plus the
runtime's instruments, which the runtime filled while it completed its share). Every answer is
checked to hold a depth for each queue. Beside wall times (which a loaded host inflates), the
CPU one scrape cost this process (the app and its client) and the PostgreSQL server.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from awa_tui.http.app import create_app, create_probe_app
from benchmarks import _engine as engine
from benchmarks import _harness as h
from storage import Client, Job

NAME = "metrics_scrape"
LATENCY = ("median", "p95", "p99", "max")
QUEUES = tuple(f"q{i}" for i in range(8))
TARGET_MS = 50.0
QUICK_HELP = "10,000 jobs, 3 rounds x 30 scrapes (default: 10,000 and 1,000,000, 5 x 50)"
ROUNDS = True


async def grow(client: Client, start: int, stop: int) -> None:
    """Jobs ``start``..``stop``: each tenth scheduled an hour out, two in ten completed."""
    done = [engine.Noop(i) for i in range(start, stop) if i % 10 in (0, 1)]
    later = [engine.Noop(i) for i in range(start, stop) if i % 10 == 2]
    ready = [engine.Noop(i) for i in range(start, stop) if i % 10 > 2]
    for q, queue in enumerate(QUEUES):
        await engine.insert_all(client, done[q :: len(QUEUES)], queue=queue)
    await client.run_until_idle(list(QUEUES), maintenance_interval=None)
    for q, queue in enumerate(QUEUES):
        when = datetime.now(UTC) + timedelta(hours=1)
        await engine.insert_all(client, later[q :: len(QUEUES)], queue=queue, run_at=when)
        await engine.insert_all(client, ready[q :: len(QUEUES)], queue=queue)


async def scrape(http: httpx.AsyncClient) -> float:
    """Milliseconds for one checked scrape."""
    ms, answer = await h.timed(http.get("/metrics"))
    body = answer.content
    if answer.status_code != 200 or not all(
        f'awa_queue_depth{{queue="{q}",state="available"}}'.encode() in body for q in QUEUES
    ):
        raise AssertionError(f"scrape answered {answer.status_code} without every queue")
    return ms


async def amain(args: Any) -> int:
    sizes = (10_000,) if args.quick else (10_000, 1_000_000)
    rounds = args.rounds or (3 if args.quick else 5)
    calls = 30 if args.quick else 50
    rows, data = [], []
    async with (
        engine.session(args.dsn) as (dsn, conn, machine),
        engine.queue_schema(conn, dsn, "bench_metrics") as (_, client),
    ):

        @client.task(engine.Noop)
        async def noop(job: Job[engine.Noop]) -> None:
            return None

        registry = client.enable_prometheus()
        server = await h.ServerCpu.find(conn)
        apps = {
            "serve (queue gauges)": create_app(client, token=None),
            "worker port (gauges + runtime)": create_probe_app(client, registry),
        }
        have = 0
        for size in sizes:
            await grow(client, have, size)
            have = size
            await conn.execute("VACUUM ANALYZE")
            for label, app in apps.items():
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
                    for _ in range(5):  # warm-up, not recorded
                        await scrape(http)
                    by_round = []
                    cpu, db = time.process_time(), server.seconds() if server else 0.0
                    for round_no in range(rounds):
                        by_round.append([await scrape(http) for _ in range(calls)])
                        median = statistics.median(by_round[-1])
                        engine.log(f"{size:,} jobs, {label}, round {round_no + 1}: {median:.1f} ms")
                n = rounds * calls
                own_ms = (time.process_time() - cpu) * 1000 / n
                db_ms = f"{(server.seconds() - db) * 1000 / n:.1f}" if server else "n/a"
                s = h.latency_stats([ms for r in by_round for ms in r])
                medians = h.Stat.of([statistics.median(r) for r in by_round]).fmt(".1f")
                verdict = "yes" if s["p95"] < TARGET_MS else "NO"
                cells = (*h.stat_cells(s, LATENCY, ".1f"), medians, f"{own_ms:.1f}", db_ms)
                rows.append((f"{size:,}", label, *cells, verdict))
                data.append(
                    {
                        "jobs": size,
                        "endpoint": label,
                        "ms_by_round": by_round,
                        "cpu_ms_per_scrape": own_ms,
                        "server_cpu_ms_per_scrape": db_ms,
                    }
                )
    table = h.Table(
        f"one /metrics scrape, ms ({rounds} rounds x {calls} scrapes, in process over ASGI)",
        (
            "jobs",
            "endpoint",
            *LATENCY,
            "round medians",
            "CPU ms here",
            "CPU ms server",
            f"p95 under {TARGET_MS:g} ms",
        ),
        tuple(rows),
    )
    meta = {"machine": machine, "rounds": rounds, "scrapes_per_round": calls, "queues": 8}
    return h.report(args, NAME, data, meta, title="metrics scrape", tables=[table])
