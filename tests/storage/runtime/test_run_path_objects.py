"""The run path makes fewer objects per attempt without changing what handlers see.

A plain job's tags, metadata and errors are made when the handler asks for them: still empty,
still its own to change. Handlers start in waves of ``SPAWN_WAVE`` per turn of the event loop
(``Runtime._start_handlers``): handlers that await all run side by side all the same, and the
completions of a claim's quick handlers share a flush (tests/storage/test_core.py counts them).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from pydantic import BaseModel

from storage import Client, Job
from storage.runtime.loop import SPAWN_WAVE


class Step(BaseModel):
    n: int


async def test_a_plain_jobs_lists_are_empty_its_own_and_keep_what_the_handler_puts_there(
    client: Client,
) -> None:
    seen: list[tuple[list[str], dict[str, Any], list[Any]]] = []

    @client.task(Step)
    async def handler(job: Job[Step]) -> None:
        assert (job.tags, job.metadata, job.errors) == ([], {}, [])
        job.tags.append(f"t{job.args.n}")
        job.metadata["n"] = job.args.n
        assert (job.tags, job.metadata) == ([f"t{job.args.n}"], {"n": job.args.n})
        seen.append((job.tags, job.metadata, job.errors))

    await client.insert_many([Step(n=1), Step(n=2)])
    await client.run_until_idle(maintenance_interval=None)

    assert sorted(tags[0] for tags, _, _ in seen) == ["t1", "t2"]
    (tags1, meta1, errors1), (tags2, meta2, errors2) = seen
    assert tags1 is not tags2
    assert meta1 is not meta2
    assert errors1 is not errors2


async def test_handlers_that_await_all_run_together_across_the_waves(
    client: Client, conn: asyncpg.Connection
) -> None:
    """Each handler waits (bounded) until every one of them has started: a wave that waited
    for the previous one's handlers to end would time them out."""
    jobs = 3 * SPAWN_WAVE + 5
    everyone_started = asyncio.Event()
    started = 0

    @client.task(Step)
    async def handler(job: Job[Step]) -> None:
        nonlocal started
        started += 1
        if started == jobs:
            everyone_started.set()
        await asyncio.wait_for(everyone_started.wait(), 30)

    await client.insert_many([Step(n=i) for i in range(jobs)])
    await client.run_until_idle(concurrency=jobs, claim_size=jobs, maintenance_interval=None)

    assert started == jobs
    completed = await conn.fetchval("SELECT sum(completed_count) FROM receipt_completion_batches")
    assert completed == jobs
