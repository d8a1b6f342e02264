"""A job's "Actions taken" (``explain_job(..., actions=N)``) come from the job's own snapshot:
an operator write that commits while the job is read is in neither the row nor the actions,
never in one and not the other; a schema without the audit trail reads the job all the same.

The moment inside the read is made deterministic as in ``test_one_job_snapshot``: a hook runs
after the job's row is read and before its facts and actions are, and commits an operator retry
(which writes its audit entry in the same transaction) from another connection. With the
actions read by a second, separate call (as the detail did), the retry's entry was listed
beside a row still failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from storage import Client, JobState
from storage.read import output_facts
from tests.storage.ops.test_admin import _job_in, _register


def _before_facts(
    monkeypatch: pytest.MonkeyPatch, hook: Callable[[], Awaitable[object]]
) -> list[int]:
    """Run ``hook`` once, between the job's row and its facts; returns its runs."""
    original = output_facts.read_facts
    runs: list[int] = []

    async def facts_after_hook(*args: Any, **kwargs: Any) -> Any:
        if not runs:
            runs.append(1)
            await hook()
        return await original(*args, **kwargs)

    monkeypatch.setattr(output_facts, "read_facts", facts_after_hook)
    return runs


async def test_a_retry_that_commits_during_the_read_is_in_neither_the_row_nor_the_actions(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _register(client)
    job_id = await _job_in(client, "failed")
    runs = _before_facts(monkeypatch, lambda: client.retry_job(job_id, actor="ana"))

    account = await client.explain_job(job_id, actions=20)

    assert runs == [1], "the hook never ran"
    assert account.row is not None
    assert account.row.state is JobState.FAILED
    assert account.actions == (), "an action committed after the row was read is listed"
    monkeypatch.undo()
    after = await client.explain_job(job_id, actions=20)
    assert after.row is not None
    assert after.row.state is JobState.AVAILABLE
    assert after.actions is not None
    assert [(e.action, e.actor) for e in after.actions] == [("retry_job", "ana")]


async def test_actions_are_the_newest_first_and_bounded(client: Client) -> None:
    _register(client)
    job_id = await _job_in(client, "available")
    other = await _job_in(client, "available")
    await client.cancel_job(other, actor="bo")  # another job's entry: not this one's
    await client.cancel_job(job_id, actor="ana", reason="first")
    await client.retry_job(job_id, actor="ana", reason="second")

    newest = await client.explain_job(job_id, actions=1)
    both = await client.explain_job(job_id, actions=20)

    assert newest.actions is not None
    assert both.actions is not None
    assert [e.reason for e in newest.actions] == ["second"]
    assert [e.reason for e in both.actions] == ["second", "first"]
    assert (await client.explain_job(job_id)).actions == ()  # none asked, none read


async def test_a_schema_without_the_audit_trail_still_reads_the_job(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The trail is looked for before it is read: a statement failing on the missing table
    would abort the snapshot's transaction (and a caller's, inside one)."""
    _register(client)
    job_id = await _job_in(client, "failed")
    await conn.execute("DROP TABLE audit_log")

    account = await client.explain_job(job_id, actions=20)

    assert account.actions is None
    assert account.row is not None
    assert account.row.state is JobState.FAILED
    assert account.facts.closure == "terminal"
