"""What the table screens (queues, failure groups, DLQ, kinds, schedules) share, pinned where no
screen's own test does: the selection follows its row, and the stale mark while lost."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.table import TableScreen
from storage import Client, ConnectionFailed, Job
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, build_app

KINDS = ("resize", "thumbnail")


def register(client: Client) -> None:
    """A task per kind that always fails the same way: one failure group per kind."""
    for kind in KINDS:

        @client.task(kind=kind, queue=kind)
        async def broken(job: Job[dict[str, Any]]) -> None:
            raise RuntimeError(f"{job.kind} is broken")


async def fail(client: Client, kind: str, count: int) -> None:
    """``count`` more jobs of ``kind`` that fail for good."""
    await client.insert_many([{"n": n} for n in range(count)], kind=kind, max_attempts=1)
    await client.run_until_idle([kind])


async def open_groups(pilot: Pilot[Any]) -> FailureGroupsScreen:
    await settle(pilot)
    await pilot.press("G")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, FailureGroupsScreen)
    return screen


async def test_the_selected_failure_group_stays_selected_when_the_groups_reorder(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    """Groups are ordered by size, so a refresh during an incident reorders them: the cursor
    stays on the group the person was reading (and would retry), not on its old position."""
    register(client)
    await fail(client, "resize", 3)
    await fail(client, "thumbnail", 2)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_groups(pilot)
        await pilot.press("j")
        await settle(pilot)
        assert screen.current is not None
        assert screen.current.kind == "thumbnail"
        await fail(client, "thumbnail", 2)  # now 4 against 3: thumbnail moves to the top
        await pilot.press("r")
        await settle(pilot)
        assert [g.kind for g in screen.rows] == ["thumbnail", "resize"]
        assert screen.current is not None
        assert screen.current.kind == "thumbnail"
        assert "Kind thumbnail" in text_of(screen.query_one("#group-summary"))


@pytest.mark.parametrize("jump", ["failure_groups", "queues", "dlq", "kinds", "schedules"])
async def test_a_table_screen_keeps_its_rows_marked_stale_while_the_connection_is_lost(
    migrated_dsn: str, schema: str, client: Client, jump: str
) -> None:
    """Every table screen says its rows are stale, not only the live ones: the kinds screen's
    counts are as old as the last read."""
    register(client)
    await fail(client, "resize", 3)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await app.run_action(f"jump('{jump}')")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, TableScreen)
        head = f"#{screen.READ_GROUP}-head"
        rows = list(screen.rows)
        assert "stale" not in text_of(screen.query_one(head))
        # No pause before the checks: the app's health probe would find the database again.
        app.note_lost(ConnectionFailed("PostgreSQL at db:5432 is unreachable."))
        assert "stale: the connection is lost" in text_of(screen.query_one(head))
        assert screen.rows == rows
        app.note_read()
        await settle(pilot)
        assert "stale" not in text_of(screen.query_one(head))
