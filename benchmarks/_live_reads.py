"""Reads of every job of a live workload, as the console's detail pane and the HTTP API make
them, counting the ones that miss a job that exists.

A runtime works through a mix that moves jobs between states all the time: compact and
general completions, tags, unique keys, immediate retries, snoozes and callbacks answered from
outside; a feeder keeps inserting, one job and ``insert_many`` at a time, and re-inserts held
unique keys (whose holder it must be handed, never ``JobNotFound``). Readers meanwhile read
every job inserted so far with ``Client.get_job`` and ``GET /api/jobs/{id}``. Nothing is
deleted, so every read must find its job: a ``None``, a 404 or a ``JobNotFound`` is a miss.

``tests/storage/read/test_one_job_hammer.py`` runs it for a few seconds; ``python -m
benchmarks one_job_reads`` for tens of thousands of reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel

from awa_tui.http.app import create_app
from storage import Client, Job, JobNotFound, RetryAfter, Snooze, Tasks, WaitForCallback

TOKEN = "live-reads-token"
READERS = 4
MODES = ("compact", "tags", "unique", "retry", "snooze", "callback")


class Live(BaseModel):
    n: int
    mode: str


@dataclass
class Misses:
    reads: int = 0
    http_reads: int = 0
    none: int = 0
    not_found_http: int = 0
    job_not_found: int = 0
    keyed_inserts: int = 0
    jobs: int = 0

    @property
    def total(self) -> int:
        return self.none + self.not_found_http + self.job_not_found


async def run(dsn: str, schema: str, *, reads: int, seconds: float) -> Misses:
    """Read until ``reads`` reads were made or ``seconds`` passed, whichever comes first."""
    tasks = Tasks()
    parked: asyncio.Queue[str] = asyncio.Queue()
    runs: dict[int, int] = {}

    @tasks.task(Live)
    async def live(job: Job[Live]) -> Any:
        runs[job.id] = first = runs.get(job.id, 0) + 1
        match job.args.mode:
            case "retry" if first == 1:
                return RetryAfter(0)
            case "snooze" if first == 1:
                return Snooze(0)
            case "callback" if first == 1:
                token = await job.register_callback(timeout_seconds=600)
                parked.put_nowait(token.callback_id)
                return WaitForCallback(token)
        job.set_output({"n": job.args.n})
        return None

    misses = Misses()
    ids: list[int] = []
    numbers = itertools.count()
    stop = asyncio.Event()

    def options(mode: str, n: int) -> dict[str, Any]:
        if mode == "tags":
            return {"tags": ["t"]}
        return {"unique_key": f"u{n}"} if mode == "unique" else {}

    async def feed(actor: Client) -> None:
        while not stop.is_set():
            n = next(numbers)
            mode = MODES[n % len(MODES)]
            if n % 2:
                ids.append((await actor.insert(Live(n=n, mode=mode), **options(mode, n))).id)
            else:
                batch = [Live(n=n, mode=mode)]
                ids.extend(await actor.insert_many(batch, returning="ids", **options(mode, n)))
            if mode == "unique" and n >= len(MODES):  # the key of an earlier job: its holder
                again = n - len(MODES)
                try:
                    row = await actor.insert(Live(n=again, mode=mode), unique_key=f"u{again}")
                except JobNotFound:
                    misses.job_not_found += 1
                else:
                    misses.keyed_inserts += 1
                    if not row.duplicate:
                        ids.append(row.id)
            await asyncio.sleep(0.002)

    async def answer(actor: Client) -> None:
        while True:
            await actor.complete_external(await parked.get(), output={"ok": True})

    async def read(reader: Client, http: httpx.AsyncClient, turn: int) -> None:
        for i in itertools.count(turn):
            if stop.is_set():
                return
            if not ids:
                await asyncio.sleep(0.001)
                continue
            job_id = ids[i % len(ids)]
            if i % 2:
                misses.none += await reader.get_job(job_id) is None
            else:
                answer = await http.get(f"/api/jobs/{job_id}")
                misses.not_found_http += answer.status_code != httpx.codes.OK  # 404 before
                misses.http_reads += 1
            misses.reads += 1
            if misses.reads >= reads:
                stop.set()

    async with (
        await Client.connect(dsn, schema, tasks=tasks) as worker,
        await Client.connect(dsn, schema, tasks=tasks) as actor,
        await Client.connect(dsn, schema) as reader,
        await Client.connect(dsn, schema) as served,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(served, token=TOKEN)),
            base_url="http://api",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as http,
    ):
        await worker.start(maintenance_interval=0.2)
        background = [asyncio.create_task(feed(actor)), asyncio.create_task(answer(actor))]
        try:
            readers = [read(reader, http, turn) for turn in range(READERS)]
            deadline = time.monotonic() + seconds
            watch = asyncio.create_task(_stop_at(stop, deadline))
            await asyncio.gather(*readers)
            watch.cancel()
        finally:
            stop.set()
            for task in background:
                task.cancel()
            for task in background:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await worker.shutdown()  # its handlers are quick: let the last one finish
    misses.jobs = len(ids)
    return misses


async def _stop_at(stop: asyncio.Event, deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    stop.set()
