"""``n`` on Kinds: the enqueue form opens on a skeleton of the kind's published args schema with
its queue, refuses args that do not fit by their path and rule as they are typed (and on
submit), and enqueues once confirmed with a reason: the job is in the database, in the trail
and in the kind's row. Read-only, the key is hidden and refused."""

from __future__ import annotations

import json
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Button, DataTable, Input, TextArea

from awa_tui.demo import ResizeImage
from awa_tui.screens.audit import entry_renderable
from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.enqueue import EnqueueJobModal, run_at_of
from awa_tui.screens.kinds import KindsScreen
from awa_tui.skeleton import skeleton_text
from storage import AuditEntry, Client, JobState
from tests.tui.conftest import settle, text_of, wait_for_screen
from tests.tui.scenarios import FIXED_NOW, SIZE, Incident, build_app

ACTOR = "ana@console"


async def _kinds_at(pilot: Pilot[Any], kind: str) -> KindsScreen:
    await settle(pilot)
    await pilot.press("K")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, KindsScreen)
    table = screen.query_one(DataTable)
    keys = [text_of(table.get_row_at(i)[0]) for i in range(table.row_count)]
    table.move_cursor(row=keys.index(kind))
    await settle(pilot)
    return screen


def _avail(screen: KindsScreen, kind: str) -> str:
    table = screen.query_one(DataTable)
    (row,) = [
        [text_of(c) for c in table.get_row_at(i)]
        for i in range(table.row_count)
        if text_of(table.get_row_at(i)[0]) == kind
    ]
    return row[1]


async def test_the_form_opens_on_a_skeleton_refuses_by_path_and_enqueues(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, actor=ACTOR)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        kinds = await _kinds_at(pilot, "resize_image")
        before = _avail(kinds, "resize_image")
        await pilot.press("n")
        form = await wait_for_screen(pilot, EnqueueJobModal)
        await settle(pilot)
        editor = form.query_one("#args-editor", TextArea)
        published = ResizeImage.model_json_schema(mode="validation")
        assert editor.text == skeleton_text(published)
        assert json.loads(editor.text) == {"image_id": 0, "width": 0, "height": 0}
        assert form.query_one("#enqueue-queue", Input).value == "images"
        assert "image_id integer · required" in text_of(form.query_one("#args-fields"))
        assert "✓" in text_of(form.query_one("#args-check"))

        editor.text = '{"image_id": 9, "width": "wide", "height": 4}'
        await settle(pilot)
        assert text_of(form.query_one("#args-check")).startswith("✗ args $.width:")
        assert "wide" not in text_of(form.query_one("#args-check"))
        assert form.query_one("#submit", Button).disabled
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert app.screen is form  # refused here: nothing to confirm
        (toast,) = [n for n in app._notifications if n.title == "Not enqueued"]
        assert toast.message.startswith("args $.width:")

        editor.text = '{"image_id": 9, "width": 640, "height": 480}'
        form.query_one("#enqueue-priority", Input).value = "7"
        await settle(pilot)
        assert "priority is a whole number" in text_of(form.query_one("#options-check"))
        form.query_one("#enqueue-priority", Input).value = "1"
        await settle(pilot)
        assert not form.query_one("#submit", Button).disabled
        await pilot.press("ctrl+s")
        confirm = await wait_for_screen(pilot, ConfirmModal)
        assert "on queue images, priority 1" in text_of(confirm)
        confirm.query_one("#confirm-reason", Input).value = "re-run INC-12"
        await pilot.press("y")
        await settle(pilot)
        await app.workers.wait_for_complete()
        await settle(pilot)
        assert app.screen is kinds  # the form closed on the new job
        assert int(_avail(kinds, "resize_image")) == int(before.replace("·", "0")) + 1

    (entry, *_) = await client.list_audit(action="enqueue")
    assert (entry.actor, entry.reason, entry.queue) == (ACTOR, "re-run INC-12", "images")
    (job_id,) = entry.job_ids
    job = await client.get_job(job_id)
    assert job is not None
    assert (job.kind, job.state, job.priority, job.args) == (
        "resize_image",
        JobState.AVAILABLE,
        1,
        {"image_id": 9, "width": 640, "height": 480},
    )


async def test_read_only_hides_and_refuses_the_key(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        kinds = await _kinds_at(pilot, "resize_image")
        assert kinds.check_action("enqueue", ()) is False  # left out of the footer
        await pilot.press("n")
        await settle(pilot)
        assert app.screen is kinds
    assert await client.list_audit(action="enqueue") == []


def test_run_at_takes_a_delay_or_a_moment() -> None:
    assert run_at_of("", FIXED_NOW) is None
    later = run_at_of("15m", FIXED_NOW)
    assert later is not None
    assert (later - FIXED_NOW).total_seconds() == 900
    at = run_at_of("2026-12-02T10:00", FIXED_NOW)
    assert at is not None
    assert (at.isoformat(), str(at.tzinfo)) == ("2026-12-02T10:00:00+00:00", "UTC")


def test_the_trail_shows_an_enqueue_by_its_args_size_and_hash() -> None:
    stored = {
        "id": 1,
        "at": FIXED_NOW,
        "actor": ACTOR,
        "action": "enqueue",
        "job_ids": [7],
        "queue": "images",
        "output_size": 42,
        "output_sha256": "ab12",
    }
    entry = AuditEntry.from_stored(stored)
    assert (entry.args_size, entry.output_size) == (42, None)
    shown = text_of(entry_renderable(entry, FIXED_NOW))
    assert "Args    42 bytes · sha256 ab12" in shown
    assert "Output" not in shown
