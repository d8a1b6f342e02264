"""Every read of one job sees one moment: a job that completes (on either path), retries or is
promoted between two statements of the read is still read, in the state it had when the read
began, never as missing.

The moment between the statements is made deterministic: a hook runs after the read's first
statement (the job's head) and before its second (the claimed attempt), and commits the
transition from another connection. Before ``storage.db.pool.snapshot``, each of these reads
came back None (or, for the compact completion, as a job half read before and half after).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from awa_tui.http.app import create_app
from storage import Client, Job, JobState, RetryAfter
from storage.read import one_job
from storage.runtime import claim, executor
from storage.testing import AttemptWaiter
from tests.http.conftest import AUTH, TOKEN, asgi_client


class Step(BaseModel):
    mode: str


async def _handle(job: Job[Step]) -> Any:
    match job.args.mode:
        case "fail":
            raise RuntimeError("boom")
        case "retry_now":
            return RetryAfter(0)
    job.set_output({"done": job.args.mode})
    return None


# How the job is inserted, and what commits between the read's statements.
TRANSITIONS = {
    "compact completion": ("complete", {}),
    "general completion": ("complete", {"tags": ["t"]}),
    "general completion, unique key": ("complete", {"unique_key": "k"}),
    "retry": ("fail", {"tags": ["t"]}),
    "retry, then promotion": ("retry_now", {}),
}


async def _running_job(client: Client, mode: str, insert: dict[str, Any]) -> claim.ClaimedJob:
    client.task(Step)(_handle)
    await client.insert(Step(mode=mode), **insert)
    async with client.pool.acquire() as conn:
        (claimed,) = await claim.claim_batch(conn, ["default"], 1, 1800.0)
    return claimed


def _transition(
    client: Client, claimed: claim.ClaimedJob, mode: str
) -> Callable[[], Awaitable[None]]:
    async def commit() -> None:
        await executor.run_attempt(client, claimed, AttemptWaiter(client, claimed))
        await client.batcher.drain()
        if mode == "retry_now":
            assert (await client.run_maintenance()).promoted == 1

    return commit


def _between_statements(
    monkeypatch: pytest.MonkeyPatch, hook: Callable[[], Awaitable[None]]
) -> list[int]:
    """Run ``hook`` once, after the read's first statement; returns a list that counts its runs."""
    original = one_job._claimed
    runs: list[int] = []

    async def claimed_after_hook(*args: Any) -> Any:
        if not runs:
            runs.append(1)
            await hook()
        return await original(*args)

    monkeypatch.setattr(one_job, "_claimed", claimed_after_hook)
    return runs


async def _after(client: Client, job_id: int) -> JobState:
    row = await client.get_job(job_id)
    assert row is not None
    return row.state


@pytest.mark.parametrize(("mode", "insert"), TRANSITIONS.values(), ids=TRANSITIONS.keys())
async def test_get_job_reads_the_state_the_job_had_when_the_read_began(
    client: Client, monkeypatch: pytest.MonkeyPatch, mode: str, insert: dict[str, Any]
) -> None:
    claimed = await _running_job(client, mode, insert)
    runs = _between_statements(monkeypatch, _transition(client, claimed, mode))
    row = await client.get_job(claimed.job_id)
    assert runs == [1], "the hook never ran"
    assert row is not None, "a job that exists was read as missing"
    assert (row.state, row.run_lease, row.finalized_at) == (JobState.RUNNING, 1, None)
    if "unique_key" in insert:
        assert row.holds_unique_key  # as of the same moment as the state
    monkeypatch.undo()
    expected = JobState.COMPLETED if mode == "complete" else JobState.RETRYABLE
    assert await _after(client, claimed.job_id) is (
        JobState.AVAILABLE if mode == "retry_now" else expected
    )


@pytest.mark.parametrize(("mode", "insert"), TRANSITIONS.values(), ids=TRANSITIONS.keys())
async def test_the_engine_read_of_one_job_is_one_snapshot(
    client: Client, monkeypatch: pytest.MonkeyPatch, mode: str, insert: dict[str, Any]
) -> None:
    """``one_job.get_job``, which admin actions and external callbacks read with."""
    claimed = await _running_job(client, mode, insert)
    runs = _between_statements(monkeypatch, _transition(client, claimed, mode))
    async with client.pool.acquire() as conn:
        row = await one_job.get_job(conn, claimed.job_id, outputs=True)
    assert runs == [1]
    assert row is not None
    assert row.state is JobState.RUNNING


@pytest.mark.parametrize("mode", ["complete", "fail"])
async def test_a_duplicate_insert_reads_its_holder_while_the_holder_ends(
    client: Client, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """The unique holder's lookup: it raised JobNotFound ("... was deleted ... insert again")
    when the holder completed or retried between its statements."""
    claimed = await _running_job(client, mode, {"unique_key": "k", "max_attempts": 3})
    runs = _between_statements(monkeypatch, _transition(client, claimed, mode))
    duplicate = await client.insert(Step(mode=mode), unique_key="k")
    assert runs == [1]
    assert duplicate.duplicate
    assert (duplicate.id, duplicate.state) == (claimed.job_id, JobState.RUNNING)


@pytest.mark.parametrize(("mode", "insert"), TRANSITIONS.values(), ids=TRANSITIONS.keys())
async def test_the_http_detail_of_a_job_that_ends_meanwhile_is_200(
    client: Client,
    migrated_dsn: str,
    schema: str,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    insert: dict[str, Any],
) -> None:
    claimed = await _running_job(client, mode, insert)
    runs = _between_statements(monkeypatch, _transition(client, claimed, mode))
    async with (
        await Client.connect(migrated_dsn, schema) as served,
        asgi_client(create_app(served, token=TOKEN)) as http,
    ):
        answer = await http.get(f"/api/jobs/{claimed.job_id}", headers=AUTH)
    assert runs == [1]
    assert answer.status_code == httpx.codes.OK, answer.text
    assert answer.json()["state"] == "running"
