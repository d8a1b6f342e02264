"""Statements (round trips) and transactions per transition, counted on the client's pool.

Every pooled connection gets an asyncpg query logger, which sees each statement the client
sends (BEGIN, COMMIT, savepoints and the pool's reset on release included), so a count is
exact and does not depend on the host's load. Single transitions are counted around one
attempt's end (claim and read-back left out); the runtime rows divide a whole run (claims,
handlers, completions, the pool's resets) by its jobs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from benchmarks import _engine as engine
from benchmarks import _harness as h
from storage import Client, Job, WaitForCallback, claim, executor
from storage.testing import AttemptWaiter

NAME = "round_trips"
POOL_SIZE = 10


class StatementCounter:
    """Counts what the pool's connections send, by first keyword, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.trace = False
        self.counts: Counter[str] = Counter()

    def __call__(self, record: Any) -> None:
        if self.on:
            self.counts[str(record.query).split(None, 1)[0].rstrip(";").upper()] += 1
            if self.trace:
                engine.log("  " + " ".join(str(record.query).split())[:150])

    async def attach(self, pool: asyncpg.Pool) -> None:
        """Open every connection of the pool and log on each (loggers survive a release)."""
        held = [await pool.acquire() for _ in range(POOL_SIZE)]
        for conn in held:
            conn.add_query_logger(self)
        for conn in held:
            await pool.release(conn)

    async def count(self, call: Awaitable[Any]) -> tuple[int, int]:
        """(statements, transactions) sent while ``call`` runs."""
        self.counts.clear()
        self.on = True
        try:
            await call
        finally:
            self.on = False
        return sum(self.counts.values()), self.counts["BEGIN"]


@asynccontextmanager
async def counted_client(
    conn: h.Connection, dsn: str, *, trace: bool = False
) -> AsyncIterator[tuple[Client, StatementCounter]]:
    async with engine.queue_schema(conn, dsn, "bench_rt") as (_schema, client):
        counter = StatementCounter()
        counter.trace = trace
        await counter.attach(client.pool)
        yield client, counter


async def one_attempt(client: Client, counter: StatementCounter, **insert: Any) -> tuple[int, int]:
    """Insert and claim one job (not counted), then count its attempt's run and end; the
    second of two such attempts is the one counted (the first prepares the statements)."""
    counted = (0, 0)
    for _ in range(2):
        await client.insert(engine.Noop(0), **insert)
        async with client.pool.acquire() as c:
            claimed = await claim.claim_batch(c, ["default"], 1, 1800.0)

        async def end(job: Any = claimed[0]) -> None:
            await executor.run_attempt(client, job, AttemptWaiter(client, job))
            await client.batcher.drain()

        counted = await counter.count(end())
    return counted


async def external(client: Client, counter: StatementCounter) -> tuple[int, int]:
    """Jobs parked for a callback (not counted), then their external completions with an
    output; the second is counted."""
    tokens: list[str] = []

    @client.task(engine.Noop, kind="parked")
    async def parked(job: Job[engine.Noop]) -> WaitForCallback:
        token = await job.register_callback(3600)
        tokens.append(token.callback_id)
        return WaitForCallback(token)

    await client.insert_many([engine.Noop(0), engine.Noop(1)], kind="parked")
    async with client.pool.acquire() as c:
        claimed = await claim.claim_batch(c, ["default"], 2, 1800.0)
    for job in claimed:
        await executor.run_attempt(client, job, AttemptWaiter(client, job))
    await client.complete_external(tokens[0], output={"ok": True})
    return await counter.count(client.complete_external(tokens[1], output={"ok": True}))


async def runtime(
    client: Client, counter: StatementCounter, jobs: int, **insert: Any
) -> tuple[int, int]:
    await engine.insert_all(client, [engine.Noop(i) for i in range(jobs)], **insert)
    return await counter.count(client.run_until_idle(concurrency=64, maintenance_interval=None))


Scenario = Callable[[Client, StatementCounter], Awaitable[tuple[int, int]]]


def scenarios(jobs: int) -> list[tuple[str, int, Scenario]]:
    """(label, jobs counted, scenario) in report order."""

    async def raises(job: Job[engine.Noop]) -> None:
        raise RuntimeError("fails")

    def with_handler(handler: Any, scenario: Scenario) -> Scenario:
        async def run(client: Client, counter: StatementCounter) -> tuple[int, int]:
            client.task(engine.Noop)(handler)
            return await scenario(client, counter)

        return run

    async def noop(job: Job[engine.Noop]) -> None:
        job.set_output({"ok": True})

    def attempt(**insert: Any) -> Scenario:
        return lambda client, counter: one_attempt(client, counter, **insert)

    def run(**insert: Any) -> Scenario:
        return lambda client, counter: runtime(client, counter, jobs, **insert)

    return [
        ("compact completion, one attempt", 1, with_handler(noop, attempt())),
        ("general completion (tags), one attempt", 1, with_handler(noop, attempt(tags=["t"]))),
        (
            "general completion (unique key), one attempt",
            1,
            with_handler(noop, attempt(unique_key="k")),
        ),
        ("retry (handler raises), one attempt", 1, with_handler(raises, attempt(tags=["t"]))),
        (
            "terminal failure (max_attempts 1), one attempt",
            1,
            with_handler(raises, attempt(tags=["t"], max_attempts=1)),
        ),
        ("external completion with an output", 1, external),
        (f"runtime, {jobs} plain jobs", jobs, with_handler(noop, run())),
        (f"runtime, {jobs} jobs with tags", jobs, with_handler(noop, run(tags=["t"]))),
    ]


async def amain(args: Any) -> int:
    started = time.perf_counter()
    jobs = 200 if args.quick else args.jobs
    rows: list[dict[str, Any]] = []
    async with engine.session(args.dsn) as (dsn, conn, meta):
        for label, counted, scenario in scenarios(jobs):
            trace = args.trace and counted == 1
            async with counted_client(conn, dsn, trace=trace) as (client, counter):
                statements, transactions = await scenario(client, counter)
            rows.append(
                {
                    "transition": label,
                    "statements_per_job": statements / counted,
                    "transactions_per_job": transactions / counted,
                }
            )
            engine.log(f"{label}: {statements} statements, {transactions} transactions")
    table = h.Table(
        "Statements and transactions per job",
        ("transition", "statements / job", "transactions / job"),
        tuple(
            (r["transition"], f"{r['statements_per_job']:.2f}", f"{r['transactions_per_job']:.2f}")
            for r in rows
        ),
        caption="Counted by an asyncpg query logger on every pooled connection (BEGIN, COMMIT "
        "and the pool's reset on release included); one attempt rows leave out its claim.",
    )
    return h.report(
        args, NAME, rows, meta, started=started, title="Round trips per transition", tables=[table]
    )


def parse_args(argv: list[str]) -> Any:
    parser = h.base_parser(NAME, __doc__, quick_help="200 jobs in the runtime rows")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs in the runtime rows")
    parser.add_argument("--trace", action="store_true", help="print each single transition's SQL")
    return parser.parse_args(argv)
