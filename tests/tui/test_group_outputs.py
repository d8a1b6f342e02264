"""Failure groups with their kept outputs (G: shapes, a sample, the split by a declared field)
and schema drift per kind (K), on the pinned incident and under a live workload."""

from __future__ import annotations

from typing import Any

import asyncpg
from textual.widgets import Static

from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.kinds import KindsScreen
from awa_tui.widgets.drift import DriftPanel
from awa_tui.widgets.group_outputs import GroupOutputsPanel, next_field
from storage import Client, Job
from tests.tui.conftest import open_screen, settle, text_of, until
from tests.tui.live import assert_alive, live_workload, reach, step
from tests.tui.scenarios import DRIFTED_RECEIPT, FIXED_NOW, SIZE, Incident, build_app, seed_timeouts

TIMEOUTS = "RuntimeError: upstream timed out after <n> items"


def test_next_field_goes_round_the_declared_fields_then_none() -> None:
    assert next_field(["a", "b"], None) == "a"
    assert next_field(["a", "b"], "a") == "b"
    assert next_field(["a", "b"], "b") is None
    assert next_field(["a", "b"], "gone") == "a"
    assert next_field([], None) is None


async def test_a_group_shows_its_kept_shapes_and_splits_by_a_declared_field(
    migrated_dsn: str, schema: str, incident: Incident, client: Client, conn: asyncpg.Connection
) -> None:
    await seed_timeouts(client, conn)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "G", FailureGroupsScreen)
        assert screen.current is not None
        assert screen.current.signature == TIMEOUTS
        panel = screen.query_one(GroupOutputsPanel)
        assert await until(pilot, lambda: panel.found is not None)
        found = panel.found
        assert found is not None
        assert (found.members, found.kept) == (6, 6)
        assert [(s.label, s.count) for s in found.shapes] == [
            ("{failed_skus, skipped, updated}", 6)
        ]
        shown = text_of(panel.query_one(Static))
        assert "members among the newest 2,000 failed" in shown
        assert '"updated":80' in shown  # the newest member's sample
        for field in ("failed_skus", "skipped", "updated"):
            await pilot.press("f")
            assert await until(pilot, lambda f=field: _split(panel) == f)  # type: ignore[misc]
        found = panel.found
        assert found is not None
        assert [(v.value, v.count) for v in found.values] == [("40", 4), ("80", 2)]
        assert "Split by updated" in text_of(panel.query_one(Static))
        await pilot.press("f")  # past the last field: not split
        assert await until(pilot, lambda: panel.found is not None and panel.found.field is None)
        await pilot.press("f", "j")  # split by failed_skus, then charge_card's group
        await settle(pilot)
        assert screen.current is not None
        assert screen.current.kind == "charge_card"
        assert screen.split is None  # charge_card declares no failed_skus
        assert await until(pilot, lambda: _kind(panel) == "charge_card")
        found = panel.found
        assert found is not None
        assert [s.label for s in found.shapes] == ["{decline_code, provider, retryable}"]


def _split(panel: GroupOutputsPanel) -> str | None:
    return None if panel.found is None else panel.found.field


def _kind(panel: GroupOutputsPanel) -> str | None:
    return None if panel.found is None else panel.found.kind


async def test_split_says_why_when_the_kind_declares_no_fields(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    @client.task(kind=f"untyped_{schema}")
    async def untyped(job: Job[dict[str, Any]]) -> None:
        job.set_output({"rows": 0})
        raise RuntimeError("no schema here")

    await client.insert({}, kind=f"untyped_{schema}", max_attempts=1)
    await client.run_until_idle()
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "G", FailureGroupsScreen)
        assert screen.binding_reason("split_field") == (
            "This kind declares no output schema fields to split its outputs by."
        )
        assert not screen.check_action("split_field", ())
        panel = screen.query_one(GroupOutputsPanel)
        assert await until(pilot, lambda: panel.found is not None)
        assert "{rows}" in text_of(panel.query_one(Static))


async def test_kinds_count_stored_outputs_that_no_longer_fit_and_name_no_value(
    migrated_dsn: str, schema: str, incident: Incident, conn: asyncpg.Connection
) -> None:
    await conn.execute(DRIFTED_RECEIPT, FIXED_NOW)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "K", KindsScreen)
        panel = screen.query_one(DriftPanel)
        assert await until(pilot, lambda: panel.found is not None)
        assert panel.found is not None
        assert not panel.found.checked  # await_payment: nothing completed
        await pilot.press(*"jjjjjj")  # send_email
        assert await until(pilot, lambda: _drift_kind(panel) == "send_email")
        found = panel.found
        assert found is not None
        assert (found.checked, found.drifted) == (3, 1)
        (drifted,) = found.outputs
        assert drifted.job_id == incident.emails[1]
        assert [(v.path, v.keyword) for v in drifted.violations] == [
            ("$.accepted", "type"),
            ("$.provider", "required"),
        ]
        shown = text_of(panel.query_one(Static))
        assert "1 of 3 outputs do not fit the current schema" in shown
        assert "the latest 1,000 compact and 1,000 general-path completions" in shown
        assert "user2@example.com" not in shown
        await conn.execute("UPDATE receipt_completion_batches SET outputs = NULL")
        await pilot.press("r")  # a refresh reads the drift again
        assert await until(pilot, lambda: panel.found is not None and not panel.found.checked)


# The failed sync_inventory job's kept report (error entry #2), rewritten to break its schema.
DRIFTED_KEPT = """
UPDATE {table} SET payload = jsonb_set(payload, '{{errors,1,output,updated}}', '"many"')
 WHERE job_id = $1 AND payload -> 'errors' -> 1 ? 'output'
"""


async def test_kinds_count_the_outputs_failed_attempts_kept_and_say_so(
    migrated_dsn: str, schema: str, incident: Incident, conn: asyncpg.Connection
) -> None:
    rewritten = [
        await conn.execute(DRIFTED_KEPT.format(table=table), incident.failed)
        for table in ("done_entries", "ready_entries")
    ]
    assert "UPDATE 1" in rewritten  # wherever the failed job's payload is kept
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "K", KindsScreen)
        panel = screen.query_one(DriftPanel)
        for _ in range(len(screen.rows)):
            if screen.current is not None and screen.current.kind == "sync_inventory":
                break
            await pilot.press("j")
        assert await until(pilot, lambda: _drift_kind(panel) == "sync_inventory")
        found = panel.found
        assert found is not None
        assert found.kind == "sync_inventory"
        assert found.kept_drifted == 1
        assert found.kept_checked >= 1
        listed = [o for o in found.outputs if o.job_id == incident.failed]
        assert [(o.storage_path, o.kept_by) for o in listed] == [("error entry", "failed")]
        assert [(v.path, v.keyword) for v in listed[0].violations] == [("$.updated", "type")]
        shown = text_of(panel.query_one(Static))
        assert "(1 kept by failed attempts)" in shown
        assert "kept: failed" in shown
        assert "many" not in shown


def _drift_kind(panel: DriftPanel) -> str | None:
    return None if panel.found is None else panel.found.kind


async def test_live_groups_and_kinds_follow_the_workload(migrated_dsn: str, schema: str) -> None:
    """Under the demo workload: the group panel keeps up with its group's size (one read per
    change, the last answer only), and the drift of send_email reads its live outputs."""
    async with live_workload(migrated_dsn, schema):
        app = build_app(migrated_dsn, schema, refresh=0.3)
        async with app.run_test(size=SIZE) as pilot:
            await step(pilot, "G")
            assert await reach(pilot, FailureGroupsScreen)
            groups = app.screen
            assert isinstance(groups, FailureGroupsScreen)
            panel = groups.query_one(GroupOutputsPanel)

            def caught_up() -> bool:
                g, found = groups.current, panel.found
                return (
                    g is not None
                    and found is not None
                    and (found.kind, found.signature, found.members)
                    == (g.kind, g.signature, g.count)
                )

            assert await until(pilot, caught_up, within=20)
            await step(pilot, rest=1.0)  # live refreshes go on; the panel follows
            assert await until(pilot, caught_up, within=20)
            await step(pilot, "escape", "K")
            assert await reach(pilot, KindsScreen)
            kinds = app.screen
            assert isinstance(kinds, KindsScreen)
            assert await until(pilot, lambda: len(kinds.rows) > 1)
            target = [row.kind for row in kinds.rows].index("send_email")
            await step(pilot, *["j"] * target)
            drift = kinds.query_one(DriftPanel)
            assert await until(pilot, lambda: _drift_kind(drift) == "send_email", within=20)
            assert drift.found is not None
            assert drift.found.schema_declared
            assert drift.found.drifted == 0  # the demo's handlers record what they declare
            assert_alive(app)
