"""Job kind descriptors and lifecycle events against a real PostgreSQL.

Descriptors live in the control schema (``awa.job_kind_descriptors``), shared by every test in
the session, so each test names its kinds after its own queue-storage schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from storage import (
    Cancel,
    Client,
    InvalidOption,
    Job,
    JobEvent,
    JobState,
    RetryAfter,
    Snooze,
    TerminalError,
    WaitForCallback,
)
from storage.db.sql import MAINTENANCE_LEADER_LOCK_CLASS
from storage.finalize.types import Outcome
from storage.ops.maintenance import MaintenanceSettings
from storage.runtime.claim import claim_batch
from storage.testing import work_one
from storage.values.events import EventBus

Args = dict[str, Any]


class Resized(BaseModel):
    width: int
    height: int


@pytest.fixture
async def control(migrated_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A raw connection for the control schema ``awa``."""
    conn = await asyncpg.connect(migrated_dsn)
    try:
        yield conn
    finally:
        await conn.close()


async def _descriptor_row(control: asyncpg.Connection, kind: str) -> asyncpg.Record:
    row = await control.fetchrow(
        "SELECT tags, description, descriptor_hash, updated_at, last_seen_at"
        " FROM awa.job_kind_descriptors WHERE kind = $1",
        kind,
    )
    assert row is not None
    return row


async def _age(control: asyncpg.Connection, kind: str) -> None:
    """Move both timestamps an hour back, so any refresh is visible."""
    await control.execute(
        "UPDATE awa.job_kind_descriptors SET updated_at = updated_at - interval '1 hour',"
        " last_seen_at = last_seen_at - interval '1 hour' WHERE kind = $1",
        kind,
    )


# -- descriptors ------------------------------------------------------------------------------


async def test_sync_publishes_the_declared_descriptor(client: Client, schema: str) -> None:
    kind = f"{schema}_resize"
    declared = client.job_kind_descriptor(
        kind,
        display_name="Resize image",
        description="Makes thumbnails",
        owner="media-team",
        docs_url="https://example.test/resize",
        tags=["images", "cpu"],
        extra={"sla_seconds": 30},
        output={"type": "Resized"},
    )
    assert declared.kind == kind

    await client.sync_descriptors()

    stored = await client.get_descriptor(kind)
    assert stored is not None
    assert (stored.display_name, stored.description, stored.owner, stored.docs_url) == (
        "Resize image",
        "Makes thumbnails",
        "media-team",
        "https://example.test/resize",
    )
    assert stored.tags == ["images", "cpu"]
    assert stored.extra == {"sla_seconds": 30}
    assert stored.output == {"type": "Resized"}
    assert stored.descriptor_hash
    assert stored.created_at is not None
    assert stored.updated_at is not None


async def test_updated_at_moves_only_when_the_content_changes(
    client: Client, control: asyncpg.Connection, schema: str
) -> None:
    kind = f"{schema}_ship"
    client.job_kind_descriptor(kind, description="v1", tags=["a"])
    await client.sync_descriptors()
    await _age(control, kind)
    before = await _descriptor_row(control, kind)

    await client.sync_descriptors()  # same content

    same = await _descriptor_row(control, kind)
    assert same["updated_at"] == before["updated_at"]
    assert same["last_seen_at"] > before["last_seen_at"]
    assert same["descriptor_hash"] == before["descriptor_hash"]

    client.job_kind_descriptor(kind, description="v1", tags=["a", "b"])
    await _age(control, kind)
    before = await _descriptor_row(control, kind)
    await client.sync_descriptors()  # changed content

    changed = await _descriptor_row(control, kind)
    assert changed["updated_at"] > before["updated_at"]
    assert changed["last_seen_at"] > before["last_seen_at"]
    assert changed["descriptor_hash"] != before["descriptor_hash"]
    assert list(changed["tags"]) == ["a", "b"]


async def test_the_runtime_publishes_its_tasks_descriptors_at_start(
    client: Client, schema: str
) -> None:
    kind = f"{schema}_thumb"

    @client.task(kind=kind, output=Resized)
    async def thumb(job: Job[Args]) -> None:
        job.set_output(Resized(width=1, height=2))

    client.job_kind_descriptor(kind, display_name="Thumbnail")
    assert await client.get_descriptor(kind) is None

    await client.start(maintenance_interval=None)
    await client.shutdown()

    stored = await client.get_descriptor(kind)
    assert stored is not None
    assert stored.display_name == "Thumbnail"
    assert stored.output_type_name == "Resized"
    assert stored.output_schema is not None
    assert "width" in stored.output_schema["properties"]


async def test_a_descriptor_nobody_refreshed_is_stale(
    client: Client, control: asyncpg.Connection, schema: str
) -> None:
    kind = f"{schema}_stale"
    client.job_kind_descriptor(kind, display_name="Stale soon")
    await client.sync_descriptors()

    def summary(kinds: list[Any]) -> Any:
        (found,) = [k for k in kinds if k.kind == kind]
        return found

    assert summary(await client.list_kinds()).stale is False
    await control.execute(
        "UPDATE awa.job_kind_descriptors SET last_seen_at = now() - interval '1 hour'"
        " WHERE kind = $1",
        kind,
    )
    assert summary(await client.list_kinds()).stale is True
    await client.sync_descriptors()  # a live runtime refreshes it
    assert summary(await client.list_kinds()).stale is False


async def test_list_kinds_returns_descriptors_and_live_job_counts(
    client: Client, schema: str
) -> None:
    kind, other = f"{schema}_counted", f"{schema}_undescribed"
    client.job_kind_descriptor(kind, display_name="Counted")

    @client.task(kind=kind)
    async def handler(job: Job[Args]) -> None:
        if job.args.get("fail"):
            raise TerminalError("no")

    @client.task(kind=other)
    async def other_handler(job: Job[Args]) -> None:
        return None

    await client.sync_descriptors()
    await client.insert({"fail": True}, kind=kind)
    assert await work_one(client) is not None  # failed
    await client.insert_many([{"n": i} for i in range(3)], kind=kind)  # available...
    async with client.pool.acquire() as c:
        await claim_batch(c, ["default"], 1, 60)  # ...one of them running
    cancelled = await client.insert({"n": 9}, kind=kind)
    await client.cancel_job(cancelled.id)
    await client.insert({"n": 1}, kind=other, queue="elsewhere")

    kinds = {k.kind: k for k in await client.list_kinds() if k.kind in (kind, other)}

    counted = kinds[kind]
    assert counted.descriptor is not None
    assert counted.descriptor.display_name == "Counted"
    assert counted.counts == {
        JobState.FAILED: 1,
        JobState.AVAILABLE: 2,
        JobState.RUNNING: 1,
        JobState.CANCELLED: 1,
    }
    assert counted.stale is False
    assert counted.dlq == 0
    assert kinds[other].counts == {JobState.AVAILABLE: 1}


# -- lifecycle events -------------------------------------------------------------------------


def _recorder(client: Client, kinds: list[str] | None = None) -> list[tuple[str, int]]:
    seen: list[tuple[str, int]] = []
    client.on_event(lambda e: seen.append((e.name, e.job_id)), kinds=kinds)
    return seen


async def test_events_for_each_executor_outcome(client: Client) -> None:
    @client.task(kind="ev_job")
    async def handler(job: Job[Args]) -> Any:
        match job.args["do"]:
            case "complete":
                job.set_output({"ok": True})
                return None
            case "retry":
                return RetryAfter(3600)
            case "exhaust":
                raise RuntimeError("always")
            case "cancel":
                return Cancel("not needed")
            case "snooze":
                return Snooze(3600)
            case "park":
                return WaitForCallback(await job.register_callback(timeout_seconds=60))
        raise AssertionError(job.args)

    outputs: list[JobEvent] = []
    client.on_event(lambda e: outputs.append(e) if e.name == "completed" else None)
    seen = _recorder(client)
    expected: list[tuple[str, int]] = []
    for do, name in [
        ("complete", "completed"),
        ("retry", "retried"),
        ("exhaust", "exhausted"),
        ("cancel", "cancelled"),
        ("snooze", "snoozed"),
        ("park", "waiting_for_callback"),
    ]:
        job = await client.insert(
            {"do": do}, kind="ev_job", max_attempts=1 if do == "exhaust" else 5
        )
        result = await work_one(client)
        assert result is not None
        assert result.ended.outcome is Outcome.WRITTEN
        expected += [("started", job.id), (name, job.id)]

    assert seen == expected
    (completed,) = outputs
    assert completed.kind == "ev_job"
    assert completed.queue == "default"
    assert completed.output == {"ok": True}


async def test_events_are_filtered_by_job_kind_and_a_failing_listener_breaks_nothing(
    client: Client,
) -> None:
    @client.task(kind="ev_a")
    async def a(job: Job[Args]) -> None:
        return None

    @client.task(kind="ev_b")
    async def b(job: Job[Args]) -> None:
        return None

    def broken(event: JobEvent) -> None:
        raise RuntimeError("listener bug")

    client.on_event(broken)
    only_a = _recorder(client, kinds=["ev_a"])
    job_a = await client.insert({"n": 1}, kind="ev_a")
    await client.insert({"n": 1}, kind="ev_b")
    await client.run_until_idle(maintenance_interval=None)

    assert only_a == [("started", job_a.id), ("completed", job_a.id)]
    assert (await client.counts()).by_state[JobState.COMPLETED] == 2


async def test_admin_cancel_emits_cancelled_once_committed(client: Client) -> None:
    @client.task(kind="ev_admin")
    async def handler(job: Job[Args]) -> None:
        return None

    seen = _recorder(client)
    job = await client.insert({"n": 1}, kind="ev_admin")
    await client.cancel_job(job.id)
    with pytest.raises(Exception, match="is cancelled"):
        await client.cancel_job(job.id)  # refused: no second event
    assert seen == [("cancelled", job.id)]


async def test_rescues_emit_rescued_and_the_stale_completion_emits_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @client.task(kind="ev_rescue")
    async def slow(job: Job[Args]) -> WaitForCallback | None:
        if job.args.get("park"):
            return WaitForCallback(await job.register_callback(timeout_seconds=0))
        started.set()
        await release.wait()
        return None

    await client.configure_queue("default", dlq=True)
    seen = _recorder(client)
    stuck = await client.insert({"n": 1}, kind="ev_rescue")
    worker = asyncio.create_task(work_one(client))
    await asyncio.wait_for(started.wait(), 5)
    parked = await client.insert({"park": True}, kind="ev_rescue", max_attempts=1)
    assert await work_one(client) is not None

    report = await client.run_maintenance(MaintenanceSettings(heartbeat_stale_seconds=0))
    assert (report.rescued, report.timed_out) == (1, 1)
    release.set()
    late = await asyncio.wait_for(worker, 5)
    assert late is not None
    assert late.ended.outcome is Outcome.STALE

    assert seen == [
        ("started", stuck.id),
        ("started", parked.id),
        ("waiting_for_callback", parked.id),
        ("rescued", stuck.id),  # retried: attempts are left
        ("rescued", parked.id),  # callback timed out with no attempts left...
        ("exhausted", parked.id),  # ...so it failed for good (dead-lettered)
    ]
    row = await client.get_job(parked.id)
    assert row is not None
    assert row.dlq is not None
    assert row.dlq.reason == "callback_timeout"
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0


async def test_no_event_for_a_maintenance_pass_that_did_not_lead(
    client: Client, conn: asyncpg.Connection, schema: str
) -> None:
    @client.task(kind="ev_lead")
    async def handler(job: Job[Args]) -> None:
        return None

    seen = _recorder(client)
    await client.insert({"n": 1}, kind="ev_lead")
    async with client.pool.acquire() as c:
        await claim_batch(c, ["default"], 1, 0)
    await conn.execute(
        "SELECT pg_advisory_lock($1, hashtext($2))", MAINTENANCE_LEADER_LOCK_CLASS, schema
    )
    try:
        report = await client.run_maintenance(
            MaintenanceSettings(queue_rotate_interval=timedelta(0))
        )
    finally:
        await conn.execute(
            "SELECT pg_advisory_unlock($1, hashtext($2))", MAINTENANCE_LEADER_LOCK_CLASS, schema
        )
    assert report.leader is False
    assert report.rescued == 0
    assert seen == []


def test_listeners_can_take_events_by_name_and_unknown_names_are_refused() -> None:
    bus = EventBus()
    seen: list[str] = []
    bus.subscribe(lambda e: seen.append(e.name), names=["started"])
    assert bus.wants("any_kind", "started")
    assert not bus.wants("any_kind", "completed")  # not built for nobody
    bus.emit(JobEvent("completed", 1, "any_kind", "default"))
    bus.emit(JobEvent("started", 1, "any_kind", "default"))
    assert seen == ["started"]
    with pytest.raises(InvalidOption, match="'strated'"):
        bus.subscribe(lambda _e: None, names=["strated"])
