"""The console's door to the audit trail: every confirmation asks for an optional reason, and
the write is recorded as the console's actor (``--actor``) with it; the Audit screen (U) lists
entries newest first, filters by actor and action, and opens an entry's job, whose detail shows
the actions taken on it."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from awa_tui.screens.audit import AuditScreen
from awa_tui.screens.confirm import ConfirmModal, PromptModal
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.queues import QueuesScreen
from awa_tui.screens.schedules import SchedulesScreen
from storage import Client, JobState
from tests.tui.conftest import settle, text_of, until, wait_for_screen
from tests.tui.scenarios import SIZE, Incident, build_app

ACTOR = "ana@console"
SEED_ACTOR = "seed@tests"  # who the seeded incident's cancel names (tests.tui.scenarios)


async def test_a_job_write_records_the_consoles_actor_and_the_typed_reason(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.failed, actor=ACTOR)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        confirm = await wait_for_screen(pilot, ConfirmModal)
        await pilot.press("tab")  # as the field's hint says: tab, then type
        assert confirm.query_one("#confirm-reason", Input).has_focus
        await pilot.press(*"INC-9 y")  # typed into the field: y and space do not confirm
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("enter")
        await settle(pilot)
        row = await client.get_job(incident.failed)
        assert row is not None
        assert row.state is JobState.AVAILABLE
        (entry, *_) = await client.list_audit(job_id=incident.failed)
        assert (entry.action, entry.actor, entry.reason) == ("retry_job", ACTOR, "INC-9 y")
        assert await until(
            pilot, lambda: "retry_job by" in text_of(app.screen.query_one("#job-audit"))
        )
        assert f"retry_job by {ACTOR}: INC-9 y" in text_of(app.screen.query_one("#job-audit"))


async def test_a_confirmation_without_a_reason_records_none(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.available, actor=ACTOR)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("X")
        await wait_for_screen(pilot, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)
    (entry, *_) = await client.list_audit(job_id=incident.available)
    assert (entry.action, entry.actor, entry.reason) == ("cancel_job", ACTOR, None)


async def test_backing_out_records_nothing(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    before = await client.list_audit()
    app = build_app(migrated_dsn, schema, initial_job=incident.failed, actor=ACTOR)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await wait_for_screen(pilot, ConfirmModal)
        await pilot.press("n")
        await settle(pilot)
    assert await client.list_audit() == before


async def test_a_queue_pause_asks_for_a_reason_too(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, actor=ACTOR)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("Q")
        screen = await wait_for_screen(pilot, QueuesScreen)
        await settle(pilot)
        queue = screen.current
        assert queue is not None
        await pilot.press("p")
        await wait_for_screen(pilot, ConfirmModal)
        await pilot.press("tab", *"outage", "enter")
        await settle(pilot)
    (entry, *_) = await client.list_audit(action="pause_queue")
    assert (entry.queue, entry.actor, entry.reason) == (queue.queue, ACTOR, "outage")


async def test_the_audit_screen_lists_filters_and_opens_a_job(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    await client.pause_queue("mail", actor="bo", reason="provider down")
    retried = await client.retry_job(incident.failed, actor="ana", reason="fixed")
    cancelled = await client.get_job(incident.cancelled)
    assert retried is not None
    assert cancelled is not None
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("U")
        screen = await wait_for_screen(pilot, AuditScreen)
        await settle(pilot)
        table = screen.query_one(DataTable)
        rows = [[text_of(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [row[1:4] for row in rows] == [
            ["ana", "retry_job", f"job {incident.failed} in {retried.queue}"],
            ["bo", "pause_queue", "queue mail"],
            [SEED_ACTOR, "cancel_job", f"job {incident.cancelled} in {cancelled.queue}"],
        ]
        assert "Reason  fixed" in text_of(screen.query_one("#audit-entry"))

        await pilot.press("slash")
        await settle(pilot)
        await pilot.press(*"actor=bo", "enter")
        await settle(pilot)
        assert [e.actor for e in screen.rows] == ["bo"]
        assert "actor=bo" in text_of(screen.query_one("#audit-head"))
        await pilot.press("enter")  # a queue's entry has no job to open
        await settle(pilot)
        assert isinstance(app.screen, AuditScreen)

        await pilot.press("c")
        await settle(pilot)
        assert len(screen.rows) == 3
        assert screen.current is not None
        assert screen.current.actor == "bo"  # the cursor stays on its entry
        await pilot.press("k", "enter")
        detail = await wait_for_screen(pilot, JobDetailScreen)
        assert detail.job_id == incident.failed
        assert await until(
            pilot, lambda: "retry_job by ana" in text_of(detail.query_one("#job-audit"))
        )


async def test_edit_and_retry_runs_the_typed_args_and_keeps_the_originals(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    before = await client.get_job(incident.failed)
    assert before is not None
    app = build_app(migrated_dsn, schema, initial_job=incident.failed, actor=ACTOR)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("E")
        prompt = await wait_for_screen(pilot, PromptModal)
        prompt.query_one(Input).value = '{"warehouse": "eu-4"}'
        await pilot.press("enter")
        confirm = await wait_for_screen(pilot, ConfirmModal)
        confirm.query_one("#confirm-reason", Input).value = "wrong warehouse"
        await pilot.press("y")
        await settle(pilot)
        await app.workers.wait_for_complete()
    row = await client.get_job(incident.failed)
    assert row is not None
    assert (row.state, row.args) == (JobState.AVAILABLE, {"warehouse": "eu-4"})
    (entry, *_) = await client.list_audit(job_id=incident.failed)
    assert (entry.action, entry.actor, entry.reason) == ("retry_edited", ACTOR, "wrong warehouse")
    assert entry.original_args == before.args


async def test_a_schedule_runs_now_from_its_screen_and_is_audited(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    """``t`` on Schedules enqueues one job of the schedule now, in the trail with its reason;
    its next tick stays where it was."""
    before = {s.name: s for s in await client.list_schedules()}["cleanup_tmp"]
    app = build_app(migrated_dsn, schema, actor=ACTOR)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("S")
        screen = await wait_for_screen(pilot, SchedulesScreen)
        await settle(pilot)
        assert screen.current is not None
        assert screen.current.name == "cleanup_tmp"
        await pilot.press("t")
        await wait_for_screen(pilot, ConfirmModal)
        await pilot.press("tab", *"rerun", "enter")
        await settle(pilot)
    (entry, *_) = await client.list_audit(action="trigger_schedule")
    assert (entry.actor, entry.reason, entry.count) == (ACTOR, "rerun", 1)
    (job_id,) = entry.job_ids
    job = await client.get_job(job_id)
    assert job is not None
    assert job.kind == before.kind
    after = {s.name: s for s in await client.list_schedules()}["cleanup_tmp"]
    assert after.next_run_at == before.next_run_at
