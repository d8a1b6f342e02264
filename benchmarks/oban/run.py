"""Oban for Python's side of ``python -m benchmarks peers``: ``run.py DSN JOBS LIMIT``.

Run by a Python 3.12+ interpreter with ``oban`` installed (``peers`` makes the virtual
environment ``benchmarks/oban/.venv``, ignored by git, from ``requirements.txt``). Installs
Oban's schema, prints "ready", waits for "go" on stdin (the caller opens its measured window),
inserts JOBS jobs with ``enqueue_many`` in batches of 2,000, runs them in one queue of LIMIT
concurrent jobs, each returning ``Record`` of its own 100 B output (kept in the job's meta),
and prints "done <enqueue s> <run s> <completed>".
"""

import asyncio
import importlib
import sys
import time
from typing import Any

oban: Any = importlib.import_module("oban")  # only in the Python 3.12 environment
schema: Any = importlib.import_module("oban.schema")

COMPLETED = "SELECT count(*) FROM oban_jobs WHERE state = 'completed'"


def output(i: int) -> dict[str, object]:
    """100 B of JSON text, as the other systems record."""
    return {
        "updated": i % 10000,
        "skipped": i % 100,
        "warehouse": "eu-west-1",
        "took_ms": i % 5000,
        "cursor": format(i, "x").rjust(20, "0"),
    }


class _Noop:
    async def process(self, job: Any) -> Any:
        return oban.Record(output(job.args["i"]))


Noop: Any = oban.worker(queue="default")(_Noop)


async def main(dsn: str, total: int, limit: int) -> None:
    pool = await oban.Oban.create_pool(dsn, min_size=2, max_size=10)
    await schema.install(pool)
    print("ready", flush=True)
    while (await asyncio.to_thread(sys.stdin.readline)).strip() != "go":
        pass
    started = time.perf_counter()
    inserter = oban.Oban(pool=pool)
    for start in range(0, total, 2000):
        await inserter.enqueue_many(
            Noop.new({"i": i}) for i in range(start, min(total, start + 2000))
        )
    inserted = time.perf_counter()
    completed = 0
    async with oban.Oban(pool=pool, name="runner", queues={"default": limit}):
        while completed < total:
            await asyncio.sleep(0.02)
            async with pool.connection() as conn:
                completed = (await (await conn.execute(COMPLETED)).fetchone())[0]
        done = time.perf_counter()
    await pool.close()
    print(f"done {inserted - started} {done - inserted} {completed}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
