"""Statements and transactions per transition, counted on the client's pool: each end of an
attempt stays within the round trips issue #17 brought it to (benchmarks/README.md, General
path), so a change that adds a statement or a transaction per job fails here.

Every pooled connection gets an asyncpg query logger, which sees each statement the client
sends (BEGIN, COMMIT, savepoints and the pool's reset on release included). A one-attempt
count is the second of two attempts (the first prepares the statements), its insert and claim
not counted; a runtime count divides a whole run (claims, completions, resets) by its jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable
from typing import Any

import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState, WaitForCallback
from storage.finalize import compact_writes
from storage.runtime import batcher, claim, executor
from storage.testing import AttemptWaiter

SESSION_FUNCTION_CALL = "SELECT * FROM pg_temp."
POOL_SIZE = 10  # Client.connect's default pool: every connection gets the logger
RUNTIME_JOBS = 200


class Noop(BaseModel):
    i: int


class StatementCounter:
    """Counts what the pool's connections send while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.counts: Counter[str] = Counter()
        self.queries: list[str] = []

    def __call__(self, record: Any) -> None:
        if self.on:
            self.queries.append(str(record.query))
            self.counts[self.queries[-1].split(None, 1)[0].rstrip(";").upper()] += 1

    async def attach(self, client: Client) -> None:
        """Open every connection of the pool and log on each (loggers survive a release)."""
        held = [await client.pool.acquire() for _ in range(POOL_SIZE)]
        for conn in held:
            conn.add_query_logger(self)
        for conn in held:
            await client.pool.release(conn)

    async def count(self, call: Awaitable[Any]) -> tuple[int, int]:
        """(statements, transactions) sent while ``call`` runs: a call of a session function
        (``storage.db.session_functions``) is a transaction of its own."""
        self.counts.clear()
        self.queries.clear()
        self.on = True
        try:
            await call
        finally:
            self.on = False
        calls = sum(q.startswith(SESSION_FUNCTION_CALL) for q in self.queries)
        return sum(self.counts.values()), self.counts["BEGIN"] + calls


async def _handle(job: Job[Noop]) -> None:
    job.set_output({"ok": True})


async def _raise(job: Job[Noop]) -> None:
    raise RuntimeError("fails")


async def _one_attempt(client: Client, counter: StatementCounter, **insert: Any) -> tuple[int, int]:
    counted = (0, 0)
    for _ in range(2):
        await client.insert(Noop(i=0), **insert)
        async with client.pool.acquire() as c:
            [job] = await claim.claim_batch(c, ["default"], 1, 1800.0)

        async def end(job: claim.ClaimedJob = job) -> None:
            await executor.run_attempt(client, job, AttemptWaiter(client, job))
            await client.batcher.drain()

        counted = await counter.count(end())
    return counted


@pytest.mark.parametrize(
    ("handler", "insert", "statements"),
    [
        pytest.param(_handle, {}, 5, id="compact completion"),
        pytest.param(_handle, {"tags": ["t"]}, 5, id="general completion, tags"),
        pytest.param(_handle, {"unique_key": "k"}, 5, id="general completion, unique key"),
        pytest.param(_raise, {"tags": ["t"]}, 6, id="retry"),
        pytest.param(_raise, {"tags": ["t"], "max_attempts": 1}, 6, id="terminal failure"),
    ],
)
async def test_one_attempt_ends_in_one_transaction(
    client: Client, handler: Any, insert: dict[str, Any], statements: int
) -> None:
    client.task(Noop)(handler)
    counter = StatementCounter()
    await counter.attach(client)
    sent, transactions = await _one_attempt(client, counter, **insert)
    assert sent <= statements, counter.counts
    assert transactions == 1, counter.counts


async def test_external_completion_with_an_output_is_seven_statements(client: Client) -> None:
    """Five for the completion itself, two for its audit entry (v009): the check that the
    schema has a trail (a webhook's completion goes ahead unrecorded on one without) and the
    INSERT. The check could be cached per session as the output-columns probe is."""
    tokens: list[str] = []

    @client.task(Noop, kind="parked")
    async def parked(job: Job[Noop]) -> WaitForCallback:
        token = await job.register_callback(3600)
        tokens.append(token.callback_id)
        return WaitForCallback(token)

    counter = StatementCounter()
    await counter.attach(client)
    await client.insert_many([Noop(i=0), Noop(i=1)], kind="parked")
    async with client.pool.acquire() as c:
        for job in await claim.claim_batch(c, ["default"], 2, 1800.0):
            await executor.run_attempt(client, job, AttemptWaiter(client, job))
    await client.complete_external(tokens[0], output={"ok": True})  # prepares the statements
    sent, transactions = await counter.count(
        client.complete_external(tokens[1], output={"ok": True})
    )
    assert sent <= 7, counter.counts
    assert transactions == 1, counter.counts
    # Its caller is told "done": it commits synchronously, unlike a handler's flush.
    assert [q for q in counter.queries if "synchronous_commit" in q] == []


@pytest.mark.parametrize(
    ("insert", "flush"),
    [({}, compact_writes.FLUSH_FUNCTIONS[True][2]), ({"tags": ["t"]}, batcher.BEGIN_FLUSH)],
    ids=["plain", "tags"],
)
async def test_runtime_completes_many_jobs_per_transaction(
    client: Client, insert: dict[str, Any], flush: str
) -> None:
    """Measured 0.41 statements and 0.06 transactions per job (plain), 0.39 and 0.06 (tags);
    the bounds leave room for smaller claims and flushes on a loaded host, and still fail
    at one transaction per job (the general path before #17 item 6: 6.33 and 1.05)."""
    client.task(Noop)(_handle)
    counter = StatementCounter()
    await counter.attach(client)
    await client.insert_many([Noop(i=i) for i in range(RUNTIME_JOBS)], **insert)
    sent, transactions = await counter.count(
        client.run_until_idle(concurrency=64, maintenance_interval=None)
    )
    assert sent / RUNTIME_JOBS <= 1.5, counter.counts
    assert transactions / RUNTIME_JOBS <= 0.3, counter.counts
    # The completions' asynchronous commit: a compact flush is one call of the session's
    # function; a general one begins its transaction with the setting.
    assert flush in counter.queries
    assert (await client.counts()).by_state[JobState.COMPLETED] == RUNTIME_JOBS
