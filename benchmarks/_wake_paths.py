"""Every way a job becomes ready, as a table of paths: each row readies one job of an idle
runtime's queue from another client, whose call should wake that runtime at once (through the
ready notice of ``storage.insert.enqueue``), not at its next poll.

``tests/storage/runtime/test_wakeup_paths.py`` checks each row against a bound far below the
poll; ``python -m benchmarks wakeup`` times each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from pydantic import BaseModel

from storage import Client, Job, RetryAfter, Tasks, WaitForCallback
from storage.db.pool import connect_once

POLL = 5.0
"""The idle runtime's poll interval: a pick-up by polling takes up to this long."""
QUEUE = "wake"


class Step(BaseModel):
    mode: str  # what the first run does: "ok", "fail", "retry_now" or "park"
    n: int = 0


@dataclass
class Bench:
    """An idle runtime (``worker``), a client that readies jobs (``actor``), a raw connection
    on the schema, and what the handler reports."""

    worker: Client
    actor: Client
    conn: asyncpg.Connection
    started: asyncio.Queue[float] = field(default_factory=asyncio.Queue)  # each run's start
    parked: asyncio.Queue[str] = field(default_factory=asyncio.Queue)  # callback ids
    runs: dict[int, int] = field(default_factory=dict)

    async def start(self) -> None:
        """Start the runtime unless it runs: no maintenance, so only the actor promotes."""
        if self.worker.worker.runtime is None:
            await self.worker.start([QUEUE], poll_interval=POLL, maintenance_interval=None)

    def idle(self) -> bool:
        runtime = self.worker.worker.runtime
        return runtime is not None and runtime._quiet.is_set() and not runtime.inflight

    async def until_idle(self) -> None:
        """Until the runtime's last claim came back empty with nothing running (bounded)."""
        deadline = time.monotonic() + 30
        while not self.idle():
            assert time.monotonic() < deadline, "the runtime did not go idle"
            await asyncio.sleep(0.005)

    async def first_run(self) -> None:
        """Until the job just inserted ran once and the runtime went idle after it."""
        await asyncio.wait_for(self.started.get(), 30)
        await self.until_idle()

    async def handle(self, job: Job[Step]) -> Any:
        self.runs[job.id] = self.runs.get(job.id, 0) + 1
        self.started.put_nowait(time.perf_counter())
        if self.runs[job.id] > 1:
            return None
        match job.args.mode:
            case "fail":
                raise RuntimeError("first run fails")
            case "retry_now":
                return RetryAfter(0)
            case "park":
                token = await job.register_callback(timeout_seconds=600)
                self.parked.put_nowait(token.callback_id)
                return WaitForCallback(token)
        return None


@asynccontextmanager
async def bench(dsn: str, schema: str) -> AsyncIterator[Bench]:
    tasks = Tasks()
    async with (
        await Client.connect(dsn, schema, tasks=tasks) as worker,
        await Client.connect(dsn, schema, tasks=tasks) as actor,
        connect_once(dsn) as conn,
    ):
        await conn.execute(f'SET search_path TO "{schema}"')
        b = Bench(worker, actor, conn)
        tasks.task(Step, queue=QUEUE)(b.handle)
        try:
            yield b
        finally:
            await worker.shutdown()  # its handlers are quick: let the last one finish


Action = Callable[[], Awaitable[object]]
Setup = Callable[[Bench, int], Awaitable[Action]]
"""Ready the ``n``-th job of a run up to its last step (the runtime idle), and return that step."""


def _future() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


async def _insert(b: Bench, n: int) -> Action:
    await b.start()
    return lambda: b.actor.insert(Step(mode="ok", n=n))


async def _keyed_insert(b: Bench, n: int) -> Action:
    await b.start()
    return lambda: b.actor.insert(Step(mode="ok", n=n), unique_key=f"k{n}")


async def _insert_many(b: Bench, n: int) -> Action:
    await b.start()
    return lambda: b.actor.insert_many([Step(mode="ok", n=n)], returning="ids")


async def _keyed_insert_many(b: Bench, n: int) -> Action:
    await b.start()
    return lambda: b.actor.insert_many([Step(mode="ok", n=n)], unique_key=lambda s: f"m{s.n}")


async def _scheduled(b: Bench, n: int) -> Action:
    await b.start()
    row = await b.actor.insert(Step(mode="ok", n=n), run_at=_future())
    await b.conn.execute("UPDATE deferred_jobs SET run_at = now() WHERE job_id = $1", row.id)
    return b.actor.run_maintenance


async def _retryable(b: Bench, n: int) -> Action:
    await b.start()
    await b.actor.insert(Step(mode="retry_now", n=n))
    await b.first_run()
    return b.actor.run_maintenance


async def _periodic_tick(b: Bench, n: int) -> Action:
    await b.start()
    b.actor.periodic(Step(mode="ok", n=n), every=timedelta(hours=1), name=f"tick{n}")
    await b.actor.store_schedules()
    await b.conn.execute(
        "UPDATE periodic_schedules SET next_run_at = now() WHERE name = $1", f"tick{n}"
    )
    return b.actor.run_maintenance


async def _trigger_schedule(b: Bench, n: int) -> Action:
    await b.start()
    b.actor.periodic(Step(mode="ok", n=n), every=timedelta(hours=1), name=f"now{n}")
    await b.actor.store_schedules()  # its first tick is up to an hour away
    return lambda: b.actor.trigger_schedule(f"now{n}")


async def _enqueue_job(b: Bench, n: int) -> Action:
    await b.start()
    return lambda: b.actor.enqueue_job("step", {"mode": "ok", "n": n}, actor="ana")


async def _failed(b: Bench, n: int) -> int:
    await b.start()
    row = await b.actor.insert(Step(mode="fail", n=n), max_attempts=1)
    await b.first_run()
    return row.id


async def _retry_failed(b: Bench, n: int) -> Action:
    job_id = await _failed(b, n)
    return lambda: b.actor.retry_job(job_id)


async def _retry_cancelled(b: Bench, n: int) -> Action:
    await b.start()
    row = await b.actor.insert(Step(mode="ok", n=n), run_at=_future())
    await b.actor.cancel_job(row.id)
    return lambda: b.actor.retry_job(row.id)


async def _dead_lettered(b: Bench, n: int) -> int:
    await b.actor.configure_queue(QUEUE, dlq=True)
    return await _failed(b, n)


async def _retry_dlq(b: Bench, n: int) -> Action:
    job_id = await _dead_lettered(b, n)
    return lambda: b.actor.retry_dlq(job_id)


async def _retry_job_of_dlq(b: Bench, n: int) -> Action:
    job_id = await _dead_lettered(b, n)
    return lambda: b.actor.retry_job(job_id)


async def _retry_external(b: Bench, n: int) -> Action:
    await b.start()
    await b.actor.insert(Step(mode="park", n=n))
    await b.first_run()
    callback_id = b.parked.get_nowait()
    return lambda: b.actor.retry_external(callback_id)


async def _resume_queue(b: Bench, n: int) -> Action:
    await b.actor.pause_queue(QUEUE)
    runtime = b.worker.worker.runtime
    if runtime is not None:  # a later sample: idle again only after the insert's empty claim
        runtime._quiet.clear()
    await b.actor.insert(Step(mode="ok", n=n))
    await b.start()  # the first time, after the insert: its notice cannot start the job
    return lambda: b.actor.resume_queue(QUEUE)


PATHS: dict[str, Setup] = {
    "insert": _insert,
    "keyed insert": _keyed_insert,
    "insert_many (COPY)": _insert_many,
    "keyed insert_many": _keyed_insert_many,
    "promotion of a scheduled job": _scheduled,
    "promotion of a retryable job": _retryable,
    "periodic tick": _periodic_tick,
    "schedule triggered now": _trigger_schedule,
    "operator enqueue (enqueue_job)": _enqueue_job,
    "operator retry of a failed job": _retry_failed,
    "operator retry of a cancelled job": _retry_cancelled,
    "DLQ retry": _retry_dlq,
    "operator retry of a dead-lettered job": _retry_job_of_dlq,
    "retry_external": _retry_external,
    "resume_queue": _resume_queue,
}


@dataclass(frozen=True)
class Wake:
    """Seconds from the start of a path's last call to the handler's start, and how long that
    call itself took (it commits the ready job, then may read it back)."""

    seconds: float
    call_seconds: float


async def wake_seconds(b: Bench, setup: Setup, n: int, bound: float) -> Wake:
    """Ready the ``n``-th job by ``setup``'s path, the runtime idle, and time it. Raises
    ``TimeoutError`` when the handler has not started ``bound`` seconds after the call began."""
    action = await setup(b, n)
    await b.until_idle()
    while not b.started.empty():  # runs of the setup (a first, failing run) are not timed
        b.started.get_nowait()
    began = time.perf_counter()
    await action()
    returned = time.perf_counter()
    started = await asyncio.wait_for(b.started.get(), bound - (returned - began))
    return Wake(started - began, returned - began)
