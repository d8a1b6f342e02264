"""``Client.close(timeout=...)`` is bounded and clean after any fault.

Every backend of a running client is killed at several moments of its close: just before it,
as it starts, while it waits for running handlers, and while they finish and their
completions flush. Each close returns within its bound (a watchdog fails the test instead
of hanging it), raises nothing but ``AwaError``, and leaves the pool closed. A handler that
never ends is abandoned when the bound runs out.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from pydantic import BaseModel

from storage import AwaError, Client, Job
from storage.db.pool import connect_once
from tests.faults.test_chaos_kills import _kill_all, _with_application_name
from tests.storage.observe import until_true

BOUND = 3.0
WATCHDOG = BOUND + 20.0
"""A close still running after this is a hang (its bound plus slack for a loaded host)."""


class Quick(BaseModel):
    n: int


class Slow(BaseModel):
    n: int


async def _close_watched(client: Client, bound: float = BOUND) -> AwaError | None:
    """Close under the watchdog; the error it raised (an AwaError) or None."""
    try:
        async with asyncio.timeout(WATCHDOG):
            await client.close(timeout=bound)
    except TimeoutError:
        pytest.fail(f"Client.close(timeout={bound:g}) had not returned after {WATCHDOG:g}s")
    except AwaError as error:
        return error
    finally:
        assert client.pool.is_closing(), "close() left the pool open"
    return None


@pytest.mark.parametrize(
    "moment",
    [
        "before close",
        "as close starts",
        "while handlers run",
        "as handlers finish",
        "again and again until it returns",
    ],
)
async def test_close_returns_within_its_bound_after_every_backend_is_killed(
    migrated_dsn: str, schema: str, moment: str
) -> None:
    app_name = f"awa-close-{schema}"
    client = await Client.connect(_with_application_name(migrated_dsn, app_name), schema)
    release = asyncio.Event()
    running = finished = 0

    @client.task(Quick)
    async def quick(job: Job[Quick]) -> None:
        job.set_output({"n": job.args.n})

    @client.task(Slow)
    async def slow(job: Job[Slow]) -> None:
        nonlocal running, finished
        running += 1
        await release.wait()
        job.set_output({"n": job.args.n})
        finished += 1

    await client.insert_many([Quick(n=i) for i in range(500)])
    await client.insert_many([Slow(n=i) for i in range(8)])
    await client.start(concurrency=32, heartbeat_interval=0.5, maintenance_interval=0.5)
    await until_true(lambda: running == 8, WATCHDOG)  # every slow one runs, quick ones around
    async with connect_once(migrated_dsn) as killer:
        if moment == "before close":
            await _kill_all(killer, app_name)
            release.set()
            error = await _close_watched(client)
        else:
            closing = asyncio.ensure_future(_close_watched(client))
            if moment == "as close starts":
                await _kill_all(killer, app_name)
                release.set()
            elif moment == "while handlers run":  # close stopped the runtime, waits for them
                await until_true(lambda: client.worker.runtime is None, WATCHDOG)
                await _kill_all(killer, app_name)
                release.set()
            elif moment == "as handlers finish":  # their completions queued, or flushing
                release.set()
                await until_true(lambda: finished == 8, WATCHDOG)
                await _kill_all(killer, app_name)
            else:  # each step of the close (flush, UNLISTEN, the pool's own close) meets one
                release.set()
                while not closing.done():
                    await _kill_all(killer, app_name)
            error = await closing
    assert error is None or isinstance(error, AwaError), error


async def test_close_abandons_a_handler_that_outlives_its_bound(
    migrated_dsn: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = await Client.connect(migrated_dsn, schema)
    started, cancelled = asyncio.Event(), asyncio.Event()

    @client.task(Slow)
    async def never_ends(job: Job[Slow]) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    await client.insert(Slow(n=1))
    await client.start()
    await started.wait()
    with caplog.at_level(logging.WARNING, logger="storage"):
        assert await _close_watched(client, bound=0.5) is None
    assert cancelled.is_set()  # the handler did not outlive the close
    assert any("handlers were abandoned" in r.getMessage() for r in caplog.records)
