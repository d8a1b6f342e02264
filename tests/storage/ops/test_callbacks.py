"""Callbacks against a real PostgreSQL: registration, parking, the sequential wait, every external
call (complete, fail, retry, heartbeat, resolve), the lease guard, the race an external completion
wins against a waiting handler, the timeout rescue and the WaitForCallback contract violation.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from storage import (
    AwaError,
    CallbackNotFound,
    CallbackToken,
    Client,
    InvalidJobState,
    Job,
    JobEvent,
    JobState,
    StaleAttempt,
    WaitForCallback,
)
from storage.finalize.types import Outcome
from storage.testing import work_one
from tests.storage.observe import until

Args = dict[str, int]


async def _state_is(client: Client, job_id: int, state: JobState) -> bool:
    row = await client.get_job(job_id)
    return row is not None and row.state is state


async def _rows_mentioning(conn: asyncpg.Connection, needle: str) -> list[str]:
    """Every table (leaf partitions included) of the test schema holding ``needle`` in a row."""
    tables = await conn.fetch(
        "SELECT quote_ident(c.relname) AS name FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
    )
    found = []
    for table in tables:
        count = await conn.fetchval(
            f"SELECT count(*) FROM {table['name']} t WHERE t::text LIKE $1", f"%{needle}%"
        )
        if count:
            found.append(table["name"])
    return found


def _register_parking_task(
    client: Client, kind: str, *, within: float = 3600
) -> list[CallbackToken]:
    """A handler that registers a callback, records an output, and parks."""
    tokens: list[CallbackToken] = []

    @client.task(kind=kind)
    async def park(job: Job[Args]) -> WaitForCallback:
        token = await job.register_callback(timeout_seconds=within)
        tokens.append(token)
        job.set_output({"from": "handler"})  # WaitForCallback discards it
        return WaitForCallback(token)

    return tokens


async def _park_one(
    client: Client, kind: str, *, max_attempts: int = 25, within: float = 3600
) -> tuple[int, CallbackToken]:
    tokens = _register_parking_task(client, kind, within=within)
    inserted = await client.insert({"n": 1}, kind=kind, max_attempts=max_attempts)
    result = await work_one(client)
    assert result is not None
    assert result.ended.outcome is Outcome.WRITTEN
    assert result.ended.state is JobState.WAITING_EXTERNAL
    (token,) = tokens
    return inserted.id, token


async def test_register_and_park_materializes_the_attempt_and_waits(
    client: Client, conn: asyncpg.Connection
) -> None:
    job_id, token = await _park_one(client, "cb_park")

    assert token.job_id == job_id
    assert token.run_lease == 1
    state = await conn.fetchrow(
        "SELECT state, callback_id, callback_timeout_at - now() AS left FROM attempt_state"
        " WHERE job_id = $1",
        job_id,
    )
    assert state is not None
    assert state["state"] == "waiting_external"
    assert state["callback_id"] == token.callback_id
    assert 3590 < state["left"].total_seconds() <= 3600
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    assert row.callback is not None
    assert row.callback.callback_id == token.callback_id
    assert row.output is None
    listed = await client.list_jobs(state=JobState.WAITING_EXTERNAL)
    assert [r.id for r in listed] == [job_id]
    assert (await client.counts()).by_state[JobState.WAITING_EXTERNAL] == 1


async def test_parked_jobs_free_their_worker_slot(client: Client) -> None:
    _register_parking_task(client, "cb_slots")
    ids = [r.id for r in await client.insert_many([{"n": i} for i in range(3)], kind="cb_slots")]

    # One worker slot: the run only finishes if each parked handler gave its slot back.
    async with asyncio.timeout(10):
        await client.run_until_idle(concurrency=1, claim_size=1, maintenance_interval=None)

    rows = [await client.get_job(i) for i in ids]
    assert [r.state if r else None for r in rows] == [JobState.WAITING_EXTERNAL] * 3


async def test_complete_external_stores_the_output_and_never_the_payload(
    client: Client, conn: asyncpg.Connection
) -> None:
    job_id, token = await _park_one(client, "cb_complete")
    events: list[JobEvent] = []
    client.on_event(events.append)

    row = await client.complete_external(
        token.callback_id, {"secret": "tok-5c1f0a"}, output={"status": "shipped"}
    )

    assert row.id == job_id
    assert row.state is JobState.COMPLETED
    assert row.output == {"status": "shipped"}
    stored = await client.get_job(job_id)
    assert stored is not None
    assert stored.output == {"status": "shipped"}
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1
    assert await conn.fetchval("SELECT count(*) FROM attempt_state") == 0
    assert await _rows_mentioning(conn, "tok-5c1f0a") == []
    assert [(e.name, e.job_id, e.output) for e in events] == [
        ("completed", job_id, {"status": "shipped"})
    ]
    with pytest.raises(CallbackNotFound):
        await client.complete_external(token.callback_id)


async def test_complete_external_without_output_stores_none(client: Client) -> None:
    job_id, token = await _park_one(client, "cb_complete_plain")
    row = await client.complete_external(token.callback_id, {"ignored": True})
    assert row.state is JobState.COMPLETED
    assert row.output is None
    assert not row.has_output
    assert row.id == job_id


async def test_complete_external_sync_from_another_thread(client: Client) -> None:
    job_id, token = await _park_one(client, "cb_sync")

    with pytest.raises(AwaError, match="own event loop"):
        client.complete_external_sync(token.callback_id)

    row = await asyncio.to_thread(
        client.complete_external_sync, token.callback_id, {"p": 1}, output=[1, 2]
    )
    assert row.id == job_id
    assert row.state is JobState.COMPLETED
    assert row.output == [1, 2]
    with pytest.raises(CallbackNotFound):
        await asyncio.to_thread(client.complete_external_sync, token.callback_id)


async def test_run_lease_guards_external_calls(client: Client, conn: asyncpg.Connection) -> None:
    job_id, token = await _park_one(client, "cb_lease")

    with pytest.raises(StaleAttempt, match="run lease 1"):
        await client.complete_external(token.callback_id, output=1, run_lease=7)
    with pytest.raises(StaleAttempt):
        await client.fail_external(token.callback_id, "nope", run_lease=7)
    with pytest.raises(StaleAttempt):
        await client.retry_external(token.callback_id, run_lease=7)
    still = await client.get_job(job_id)
    assert still is not None
    assert still.state is JobState.WAITING_EXTERNAL
    assert await conn.fetchval("SELECT count(*) FROM attempt_closures") == 0

    row = await client.complete_external(token.callback_id, output=1, run_lease=token.run_lease)
    assert row.state is JobState.COMPLETED
    assert row.output == 1


@pytest.mark.parametrize("dlq", [False, True])
async def test_fail_external_fails_the_job_with_the_error(client: Client, dlq: bool) -> None:
    await client.configure_queue("default", dlq=dlq)
    job_id, token = await _park_one(client, "cb_fail")

    row = await client.fail_external(token.callback_id, "payment declined")

    assert row is not None
    assert row.id == job_id
    assert row.state is JobState.FAILED
    assert row.errors[-1]["error"] == "payment declined"
    assert row.errors[-1]["terminal"]
    assert "output" not in row.errors[-1]  # the external caller never saw the handler's output
    assert (row.dlq is not None) is dlq
    listed = await client.list_jobs(dlq=True)
    assert [r.id for r in listed] == ([job_id] if dlq else [])
    with pytest.raises(CallbackNotFound):
        await client.fail_external(token.callback_id, "again")


async def test_retry_external_makes_the_job_available_again_at_attempt_zero(
    client: Client,
) -> None:
    runs: list[int] = []
    tokens: list[CallbackToken] = []

    @client.task(kind="cb_retry")
    async def handler(job: Job[Args]) -> WaitForCallback | None:
        runs.append(job.attempt)
        if len(runs) == 1:
            token = await job.register_callback(timeout_seconds=3600)
            tokens.append(token)
            return WaitForCallback(token)
        return None

    inserted = await client.insert({"n": 1}, kind="cb_retry")
    assert await work_one(client) is not None

    row = await client.retry_external(tokens[0].callback_id)

    assert row is not None
    assert row.id == inserted.id
    assert row.state is JobState.AVAILABLE
    assert row.attempt == 0
    assert row.run_lease == 2
    with pytest.raises(CallbackNotFound):
        await client.retry_external(tokens[0].callback_id)
    result = await work_one(client)  # no maintenance pass needed: it is available now
    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.COMPLETED
    assert runs == [1, 1]


async def test_retry_external_refuses_an_attempt_that_is_still_running(client: Client) -> None:
    refused: list[BaseException] = []

    @client.task(kind="cb_retry_running")
    async def handler(job: Job[Args]) -> None:
        token = await job.register_callback(timeout_seconds=3600)
        try:
            await client.retry_external(token.callback_id)
        except InvalidJobState as exc:
            refused.append(exc)

    await client.insert({"n": 1}, kind="cb_retry_running")
    result = await work_one(client)

    assert result is not None
    assert result.row is not None
    assert result.row.state is JobState.COMPLETED  # the handler ran to the end, once
    (error,) = refused
    assert "is running" in str(error)


async def test_heartbeat_callback_pushes_the_timeout_out(
    client: Client, conn: asyncpg.Connection
) -> None:
    job_id, token = await _park_one(client, "cb_heartbeat", within=0)

    await client.heartbeat_callback(token.callback_id, timeout_seconds=3600)

    left = await conn.fetchval(
        "SELECT callback_timeout_at - now() FROM attempt_state WHERE job_id = $1", job_id
    )
    assert left.total_seconds() > 3500
    report = await client.run_maintenance()
    assert report.timed_out == 0
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


@pytest.mark.parametrize(
    "call",
    [
        "complete_external",
        "fail_external",
        "retry_external",
        "heartbeat_callback",
        "resolve_callback",
    ],
)
async def test_unknown_callback_ids_raise_callback_not_found(client: Client, call: str) -> None:
    unknown = str(uuid.uuid4())
    method = getattr(client, call)
    args: tuple[Any, ...] = (unknown, "error") if call == "fail_external" else (unknown,)
    with pytest.raises(CallbackNotFound, match=unknown):
        await method(*args)


async def test_sequential_wait_resumes_with_the_resolved_payload(
    client: Client, conn: asyncpg.Connection
) -> None:
    loop = asyncio.get_running_loop()
    registered: asyncio.Future[CallbackToken] = loop.create_future()
    completed = asyncio.Event()

    @client.task(kind="cb_seq")
    async def handler(job: Job[Args]) -> None:
        token = await job.register_callback(timeout_seconds=60)
        registered.set_result(token)
        payload = await job.wait_for_callback(token)
        job.set_output({"answer": payload["answer"]})

    client.on_event(lambda e: completed.set() if e.name == "completed" else None)
    inserted = await client.insert({"n": 1}, kind="cb_seq")
    await client.start(maintenance_interval=None)
    try:
        token = await asyncio.wait_for(registered, 5)
        await until(lambda: _state_is(client, inserted.id, JobState.WAITING_EXTERNAL))
        await client.resolve_callback(token.callback_id, {"answer": 42, "key": "tok-9e7d"})
        with pytest.raises(CallbackNotFound):
            await client.resolve_callback(token.callback_id, {"answer": 0})
        await asyncio.wait_for(completed.wait(), 5)
    finally:
        await client.shutdown()

    row = await client.get_job(inserted.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.output == {"answer": 42}  # the handler and its slot stayed alive across the wait
    assert await _rows_mentioning(conn, "tok-9e7d") == []


async def test_resolve_before_the_wait_starts_leaves_the_attempt_running(
    client: Client, conn: asyncpg.Connection
) -> None:
    seen: dict[str, Any] = {}

    @client.task(kind="cb_early")
    async def handler(job: Job[Args]) -> None:
        token = await job.register_callback(timeout_seconds=60)
        # The external system answers before the handler reaches wait_for_callback.
        await client.resolve_callback(token.callback_id, {"early": True})
        seen["payload"] = await job.wait_for_callback(token)
        seen["state"] = await conn.fetchrow(
            "SELECT state, callback_id, callback_timeout_at FROM attempt_state WHERE job_id = $1",
            job.id,
        )

    inserted = await client.insert({"n": 1}, kind="cb_early")
    result = await work_one(client)

    assert seen["payload"] == {"early": True}
    # Still running (so heartbeat rescue covers it), no callback left to time out or answer.
    assert dict(seen["state"]) == {
        "state": "running",
        "callback_id": None,
        "callback_timeout_at": None,
    }
    assert result is not None
    assert result.row is not None
    assert result.row.id == inserted.id
    assert result.row.state is JobState.COMPLETED


async def test_external_completion_wins_against_a_handler_waiting_in_wait_for_callback(
    client: Client, conn: asyncpg.Connection
) -> None:
    loop = asyncio.get_running_loop()
    registered: asyncio.Future[CallbackToken] = loop.create_future()
    handler_saw: list[str] = []
    events: list[str] = []

    @client.task(kind="cb_race")
    async def handler(job: Job[Args]) -> None:
        job.set_output({"from": "handler"})
        token = await job.register_callback(timeout_seconds=60)
        registered.set_result(token)
        try:
            await job.wait_for_callback(token)
            handler_saw.append("resumed")
        except StaleAttempt:
            handler_saw.append("stale")
        # ...and the handler goes on to complete: that completion must be stale.

    client.on_event(lambda e: events.append(e.name))
    inserted = await client.insert({"n": 1}, kind="cb_race")
    worker = asyncio.create_task(work_one(client))
    token = await asyncio.wait_for(registered, 5)
    await until(lambda: _state_is(client, inserted.id, JobState.WAITING_EXTERNAL))

    row = await client.complete_external(token.callback_id, output={"from": "external"})
    result = await asyncio.wait_for(worker, 5)

    assert row.state is JobState.COMPLETED
    assert handler_saw == ["stale"]
    assert result is not None
    assert result.ended.outcome is Outcome.STALE
    stored = await client.get_job(inserted.id)
    assert stored is not None
    assert stored.output == {"from": "external"}
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0
    assert events == ["started", "completed"]  # one completion, the external one


async def test_external_completion_before_the_handler_parks_makes_the_park_stale(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(kind="cb_early_complete")
    async def handler(job: Job[Args]) -> WaitForCallback:
        token = await job.register_callback(timeout_seconds=60)
        # The external system fires before the executor has parked the attempt.
        await client.complete_external(token.callback_id, output="external")
        return WaitForCallback(token)

    inserted = await client.insert({"n": 1}, kind="cb_early_complete")
    result = await work_one(client)

    assert result is not None
    assert result.ended.outcome is Outcome.STALE
    assert result.row is not None
    assert result.row.id == inserted.id
    assert result.row.state is JobState.COMPLETED
    assert result.row.output == "external"
    assert result.row.errors == []  # no contract-violation entry was written
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1


@pytest.mark.parametrize("dlq", [False, True])
async def test_wait_for_callback_without_a_registered_callback_is_a_contract_violation(
    client: Client, dlq: bool
) -> None:
    await client.configure_queue("default", dlq=dlq)
    events: list[str] = []
    client.on_event(lambda e: events.append(e.name))

    @client.task(kind="cb_contract")
    async def handler(job: Job[Args]) -> WaitForCallback:
        job.set_output({"partial": 3})
        return WaitForCallback(CallbackToken(str(uuid.uuid4()), job.id, job.run_lease))

    inserted = await client.insert({"n": 1}, kind="cb_contract", max_attempts=5)
    result = await work_one(client)

    assert result is not None
    assert result.row is not None
    row = result.row
    assert row.id == inserted.id
    assert row.state is JobState.FAILED
    (entry,) = row.errors
    assert "wait_for_callback_contract_violation" in entry["error"]
    assert entry["terminal"]
    assert entry["output"] == {"partial": 3}  # kept in the contract-violation entry
    if dlq:
        assert row.dlq is not None
        assert row.dlq.reason == "wait_for_callback_contract_violation"
    else:
        assert row.dlq is None
    assert events == ["started", "exhausted"]


@pytest.mark.parametrize(
    ("max_attempts", "dlq", "expected"),
    [
        (2, False, JobState.RETRYABLE),
        (1, False, JobState.FAILED),
        (1, True, JobState.FAILED),
    ],
)
async def test_callback_timeout_rescue(
    client: Client, max_attempts: int, dlq: bool, expected: JobState
) -> None:
    await client.configure_queue("default", dlq=dlq)
    job_id, token = await _park_one(client, "cb_timeout", max_attempts=max_attempts, within=0)

    report = await client.run_maintenance()

    assert report.timed_out == 1
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is expected
    (entry,) = row.errors
    assert entry["error"].startswith("callback timed out")
    assert "output" not in entry
    assert (row.dlq is not None and row.dlq.reason == "callback_timeout") is dlq
    with pytest.raises(CallbackNotFound):
        await client.complete_external(token.callback_id, output="late")
    again = await client.get_job(job_id)
    assert again is not None
    assert again.state is expected
    assert again.output is None


async def test_callback_timeout_ends_a_handler_waiting_in_wait_for_callback(
    client: Client, conn: asyncpg.Connection
) -> None:
    loop = asyncio.get_running_loop()
    registered: asyncio.Future[CallbackToken] = loop.create_future()
    handler_saw: list[str] = []

    @client.task(kind="cb_seq_timeout")
    async def handler(job: Job[Args]) -> None:
        job.set_output({"never": "published"})
        token = await job.register_callback(timeout_seconds=0)
        registered.set_result(token)
        try:
            await job.wait_for_callback(token)
        except StaleAttempt:
            handler_saw.append("stale")

    inserted = await client.insert({"n": 1}, kind="cb_seq_timeout")
    worker = asyncio.create_task(work_one(client))
    await asyncio.wait_for(registered, 5)
    await until(lambda: _state_is(client, inserted.id, JobState.WAITING_EXTERNAL))

    assert (await client.run_maintenance()).timed_out == 1
    result = await asyncio.wait_for(worker, 5)

    assert handler_saw == ["stale"]
    assert result is not None
    assert result.ended.outcome is Outcome.STALE
    row = await client.get_job(inserted.id)
    assert row is not None
    assert row.state is JobState.RETRYABLE
    assert row.output is None
    assert [e["error"] for e in row.errors] == ["callback timed out"]
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 0


async def test_external_fail_and_retry_emit_lifecycle_events(client: Client) -> None:
    events: list[tuple[str, int]] = []
    client.on_event(lambda e: events.append((e.name, e.job_id)))
    failed_id, fail_token = await _park_one(client, "cb_ev_fail")
    retried_id, retry_token = await _park_one(client, "cb_ev_retry")
    events.clear()

    await client.fail_external(fail_token.callback_id, "declined")
    await client.retry_external(retry_token.callback_id)

    assert events == [("exhausted", failed_id), ("retried", retried_id)]
