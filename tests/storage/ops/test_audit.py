"""The audit trail from the Python door: every operator write records exactly one entry in its
own transaction (a refused or rolled-back write leaves none), a bulk action one entry with its
filter or ids and the count it changed, a manual completion its output's size and hash but
never its text, an edit-and-retry the original args; entries are read newest first, pruned by
maintenance, never updated; a schema v009 has not reached refuses the write."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from storage import (
    ArgsValidationError,
    Client,
    InvalidJobState,
    InvalidOption,
    JobState,
    MaintenanceSettings,
    OutputError,
    SchemaNotMigrated,
    default_actor,
)
from storage.db.migrator import install_schema, migrate
from storage.db.pool import connect_once
from tests.storage.migration_db import database_at
from tests.storage.ops.test_admin import _job_in, _register

ENTRIES = "SELECT count(*) FROM audit_log"
WHOLE_ROWS = "SELECT coalesce(string_agg(row_to_json(a)::text, ' '), '') FROM audit_log a"

Call = Callable[[Client, int, str, dict[str, Any]], Awaitable[object]]

# (action recorded, the state the job starts in, the call with actor= and reason=)
AUDITED: list[tuple[str, str, Call]] = [
    ("retry_job", "failed", lambda c, job, cb, who: c.retry_job(job, **who)),
    ("retry_job", "cancelled", lambda c, job, cb, who: c.retry_job(job, **who)),
    ("cancel_job", "available", lambda c, job, cb, who: c.cancel_job(job, **who)),
    ("cancel_job", "waiting_external", lambda c, job, cb, who: c.cancel_job(job, **who)),
    ("delete_job", "completed", lambda c, job, cb, who: c.delete_job(job, **who)),
    ("delete_job", "dlq", lambda c, job, cb, who: c.delete_job(job, **who)),
    ("retry_dlq", "dlq", lambda c, job, cb, who: c.retry_dlq(job, **who)),
    ("retry_job", "dlq", lambda c, job, cb, who: c.retry_job(job, **who)),
    ("purge_dlq", "dlq", lambda c, job, cb, who: c.purge_dlq(job, **who)),
    (
        "complete_external",
        "waiting_external",
        lambda c, job, cb, who: c.complete_external(cb, output={"n": 1}, **who),
    ),
    (
        "fail_external",
        "waiting_external",
        lambda c, job, cb, who: c.fail_external(cb, "gave up", **who),
    ),
    ("retry_external", "waiting_external", lambda c, job, cb, who: c.retry_external(cb, **who)),
    (
        "heartbeat_callback",
        "waiting_external",
        lambda c, job, cb, who: c.heartbeat_callback(cb, 60, **who),
    ),
]


@pytest.mark.parametrize(
    ("action", "state", "call"), AUDITED, ids=[f"{a}-{s}" for a, s, _ in AUDITED]
)
async def test_every_operator_write_records_one_entry(
    client: Client, conn: asyncpg.Connection, action: str, state: str, call: Call
) -> None:
    tokens = _register(client)
    job_id = await _job_in(client, state, queue="mail")
    callback_id = tokens[-1].callback_id if tokens else ""
    before = await conn.fetchval(ENTRIES)

    await call(client, job_id, callback_id, {"actor": "ana@ops", "reason": "INC-7"})

    assert await conn.fetchval(ENTRIES) == before + 1
    (entry, *_) = await client.list_audit()
    assert (entry.action, entry.actor, entry.reason) == (action, "ana@ops", "INC-7")
    assert (entry.job_ids, entry.queue, entry.count, entry.filter) == ([job_id], "mail", 1, None)
    assert entry.original_args is None


async def test_the_default_actor_is_the_os_user_at_the_host(client: Client) -> None:
    _register(client)
    job_id = await _job_in(client, "failed")
    await client.retry_job(job_id)
    (entry,) = await client.list_audit(action="retry_job")
    assert entry.actor == default_actor()
    assert "@" in entry.actor
    assert entry.reason is None


async def test_queue_pause_and_resume_are_recorded(client: Client) -> None:
    await client.pause_queue("mail", actor="ana", reason="provider down")
    await client.resume_queue("mail", actor="bo")
    resumed, paused = await client.list_audit()
    assert (paused.action, paused.queue, paused.actor, paused.reason) == (
        "pause_queue",
        "mail",
        "ana",
        "provider down",
    )
    assert (resumed.action, resumed.actor, resumed.job_ids) == ("resume_queue", "bo", [])


async def test_a_refused_write_leaves_no_entry(client: Client, conn: asyncpg.Connection) -> None:
    _register(client)
    running = await _job_in(client, "running")
    with pytest.raises(InvalidJobState):
        await client.retry_job(running, actor="ana")
    assert await conn.fetchval(ENTRIES) == 0


async def test_a_completion_whose_output_is_refused_leaves_no_entry(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The output is checked inside the completion's transaction (after the attempt's lock):
    refused there, the transaction rolls back, and the job still waits."""
    tokens = _register(client)
    client.job_kind_descriptor("a_job", output={"type": "Out", "schema": {"type": "object"}})
    await client.sync_descriptors()
    job_id = await _job_in(client, "waiting_external")
    with pytest.raises(OutputError):
        await client.complete_external(tokens[-1].callback_id, output=[1, 2], actor="ana")
    assert await conn.fetchval(ENTRIES) == 0
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def test_a_write_whose_entry_fails_is_rolled_back(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The other direction: when the entry cannot be written, the write does not happen."""
    _register(client)
    job_id = await _job_in(client, "failed")
    await conn.execute("DROP TABLE audit_log")
    with pytest.raises(SchemaNotMigrated, match="v009 adds it"):
        await client.retry_job(job_id, actor="ana")
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.FAILED
    with pytest.raises(SchemaNotMigrated, match="no audit trail"):
        await client.list_audit()


async def test_a_bad_actor_or_reason_is_refused_before_anything_is_written(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    job_id = await _job_in(client, "failed")
    with pytest.raises(InvalidOption, match="actor must be non-empty"):
        await client.retry_job(job_id, actor=" ")
    with pytest.raises(InvalidOption, match="reason contains a NUL"):
        await client.retry_job(job_id, reason="a\x00b")
    with pytest.raises(InvalidOption, match="at most 1,000"):
        await client.retry_job(job_id, reason="x" * 1001)
    assert await conn.fetchval(ENTRIES) == 0
    assert (await client.get_job(job_id)) is not None


async def test_a_manual_completion_keeps_the_outputs_size_and_hash_never_its_text(
    client: Client, conn: asyncpg.Connection
) -> None:
    tokens = _register(client)
    await _job_in(client, "waiting_external")
    secret = "s3cr3t-output-value"
    row = await client.complete_external(
        tokens[-1].callback_id, {"payload": "p4yl0ad-value"}, output={"token": secret}
    )
    stored = row.output_text
    assert stored is not None
    (entry,) = await client.list_audit()
    assert entry.output_size == len(stored.encode())
    assert entry.output_sha256 == hashlib.sha256(stored.encode()).hexdigest()
    whole = await conn.fetchval(WHOLE_ROWS)
    assert secret not in whole
    assert "p4yl0ad-value" not in whole


async def test_a_bulk_action_by_filter_is_one_entry_with_the_filter_and_count(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    for _ in range(3):
        await _job_in(client, "failed", queue="mail")
    assert await client.bulk_action("retry", state="failed", dry_run=True) == 3
    assert await conn.fetchval(ENTRIES) == 0  # counting writes nothing
    assert await client.bulk_action("retry", state="failed", actor="ana", reason="fixed") == 3
    (entry,) = await client.list_audit()
    assert (entry.action, entry.filter, entry.count, entry.job_ids) == (
        "bulk_retry",
        "state=failed",
        3,
        [],
    )
    assert (entry.actor, entry.reason) == ("ana", "fixed")


async def test_a_bulk_action_on_ids_records_them_and_counts_only_what_changed(
    client: Client,
) -> None:
    _register(client)
    failed = await _job_in(client, "failed")
    running = await _job_in(client, "running")
    assert await client.bulk_action("retry", ids=[failed, running], actor="ana") == 1
    (entry,) = await client.list_audit()
    assert (entry.action, entry.job_ids, entry.count, entry.filter) == (
        "bulk_retry",
        [failed, running],
        1,
        None,
    )


async def test_a_bulk_action_that_changes_nothing_records_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    running = await _job_in(client, "running")
    assert await client.bulk_action("retry", ids=[running]) == 0
    assert await conn.fetchval(ENTRIES) == 0


@pytest.mark.parametrize("state", ["failed", "dlq"])
async def test_edit_and_retry_runs_the_new_args_and_keeps_the_originals_in_the_entry(
    client: Client, conn: asyncpg.Connection, state: str
) -> None:
    _register(client)
    job_id = await _job_in(client, state)
    row = await client.retry_job(job_id, args={"n": 2}, actor="ana", reason="typo in n")
    assert row is not None
    assert (row.state, row.args) == (JobState.AVAILABLE, {"n": 2})
    (entry,) = await client.list_audit(job_id=job_id)
    assert (entry.action, entry.original_args, entry.reason) == (
        "retry_edited",
        {"do": "fail"},
        "typo in n",
    )
    # The only args the trail holds are the originals.
    assert '"n": 2' not in await conn.fetchval(WHOLE_ROWS)


async def test_edited_args_are_checked_against_the_published_args_schema(
    client: Client, conn: asyncpg.Connection
) -> None:
    _register(client)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    client.job_kind_descriptor("a_job", extra={"args_schema": schema})
    await client.sync_descriptors()
    job_id = await _job_in(client, "failed")
    with pytest.raises(ArgsValidationError, match=r"\$\.n"):
        await client.retry_job(job_id, args={"n": "two"}, actor="ana")
    assert await conn.fetchval(ENTRIES) == 0
    row = await client.get_job(job_id)
    assert row is not None
    assert (row.state, row.args) == (JobState.FAILED, {"do": "fail"})
    row = await client.retry_job(job_id, args={"n": 2})
    assert row is not None
    assert row.args == {"n": 2}


async def test_edit_and_retry_refuses_a_job_that_has_not_failed(client: Client) -> None:
    _register(client)
    job_id = await _job_in(client, "available")
    with pytest.raises(InvalidJobState):
        await client.retry_job(job_id, args={"n": 2})
    assert await client.list_audit() == []


async def test_list_audit_filters_and_bounds(client: Client) -> None:
    await client.pause_queue("a", actor="ana")
    await client.pause_queue("b", actor="bo")
    await client.resume_queue("a", actor="ana")
    assert [e.queue for e in await client.list_audit(actor="ana")] == ["a", "a"]
    assert [e.actor for e in await client.list_audit(action="pause_queue")] == ["bo", "ana"]
    assert len(await client.list_audit(limit=1)) == 1
    assert await client.list_audit(since=timedelta(seconds=-60)) == []
    with pytest.raises(Exception, match="limit must be"):
        await client.list_audit(limit=0)


async def test_maintenance_prunes_entries_past_the_retention(
    client: Client, conn: asyncpg.Connection
) -> None:
    await client.pause_queue("a", actor="ana")
    kept = await client.run_maintenance(MaintenanceSettings(audit_retention=timedelta(days=1)))
    assert (kept.audit_pruned, await conn.fetchval(ENTRIES)) == (0, 1)
    gone = await client.run_maintenance(MaintenanceSettings(audit_retention=timedelta(0)))
    assert (gone.audit_pruned, await conn.fetchval(ENTRIES)) == (1, 0)


async def test_entries_cannot_be_changed(client: Client, conn: asyncpg.Connection) -> None:
    await client.pause_queue("a", actor="ana", reason="why")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await conn.execute("UPDATE audit_log SET actor = 'someone else'")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await conn.execute("UPDATE audit_log SET count = count - 1")
    (entry,) = await client.list_audit()
    assert (entry.actor, entry.count) == ("ana", 1)


async def test_v009_adds_the_trail_to_installed_schemas_and_writes_wait_for_it(
    pg_dsn: str,
) -> None:
    async with database_at(pg_dsn, "awa_v008", 8) as dsn:
        async with connect_once(dsn) as conn:
            await install_schema(conn, "before_v009")
        async with await Client.connect(dsn, "before_v009") as client:
            with pytest.raises(SchemaNotMigrated, match="v009 adds it"):
                await client.pause_queue("mail")
            assert await client.list_queues() == []  # the pause rolled back with its entry
            assert (await client.run_maintenance()).audit_pruned == 0  # nothing to prune
            await migrate(dsn)
            await client.pause_queue("mail", actor="ana")
            (entry,) = await client.list_audit()
            assert (entry.action, entry.queue) == ("pause_queue", "mail")
        async with connect_once(dsn) as conn:
            text = await conn.fetchval("SELECT row_to_json(a)::text FROM before_v009.audit_log a")
            assert orjson.loads(text)["actor"] == "ana"
