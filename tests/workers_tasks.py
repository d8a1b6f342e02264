"""The tasks ``awa-tui worker tests.workers_tasks:tasks`` runs in the many-process tests.

Every run of a handler, including one whose worker is killed before it ends, writes a row
(job_id, run_lease, pid) to the table ``runs`` of the schema in ``AWA_TEST_RUNS_SCHEMA`` as
it begins, on the DSN in ``AWA_DSN``: the test counts executions from that table, not from
completions, so a job run twice shows up even when only one completion counts.
"""

from __future__ import annotations

import asyncio
import os

import asyncpg
from pydantic import BaseModel

from storage import Job, Tasks, check_schema_name

tasks = Tasks()
_pool: asyncio.Task[asyncpg.Pool] | None = None  # one pool per process, made by the first run


class Count(BaseModel):
    n: int


class Dawdle(BaseModel):
    n: int
    seconds: float


async def _record(job_id: int, run_lease: int) -> None:
    global _pool
    if _pool is None:
        schema = check_schema_name(os.environ["AWA_TEST_RUNS_SCHEMA"])
        _pool = asyncio.ensure_future(
            asyncpg.create_pool(
                os.environ["AWA_DSN"],
                min_size=1,
                max_size=2,
                server_settings={"search_path": schema},
            )
        )
    pool = await _pool
    await pool.execute(
        "INSERT INTO runs (job_id, run_lease, pid) VALUES ($1, $2, $3)",
        job_id,
        run_lease,
        os.getpid(),
    )


@tasks.task(Count, queue="many")
async def count(job: Job[Count]) -> None:
    await _record(job.id, job.run_lease)
    job.set_output({"pid": os.getpid()})


@tasks.task(Dawdle, queue="many")
async def dawdle(job: Job[Dawdle]) -> None:
    await _record(job.id, job.run_lease)
    await asyncio.sleep(job.args.seconds)
