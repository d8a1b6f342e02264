"""#24.2 and #24.3 against a live workload: a drill-down pushes the browser and esc comes back
to the row it came from; a key means one thing; ``id:N`` shows job N on its own tab; no key
typed right after a tab switch is lost, even while the database is slow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual import events
from textual.widgets import Static

from awa_tui.app import make_app
from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.kinds import KindsScreen
from awa_tui.screens.queues import QueuesScreen
from awa_tui.screens.table import TableScreen
from storage import Client, JobState
from storage.db.pool import connect_once
from tests.tui.conftest import text_of, until
from tests.tui.live import CHARS, arrive, assert_alive, live_workload, step

SIZE = (120, 36)


async def until_async(check: Callable[[], Awaitable[Any]], within: float = 20.0) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError("the workload never produced it")


def row_key(screen: TableScreen[Any]) -> str | None:
    current = screen.current
    return None if current is None else screen.row_key(current)


def stable(row: object) -> bool:
    return getattr(row, "kind", None) == "charge_card"


@pytest.mark.parametrize(
    ("key", "screen_type"),
    [("G", FailureGroupsScreen), ("Q", QueuesScreen), ("K", KindsScreen)],
)
async def test_enter_then_escape_comes_back_to_the_row(
    migrated_dsn: str, schema: str, key: str, screen_type: type[TableScreen[Any]]
) -> None:
    async with live_workload(migrated_dsn, schema):
        app = make_app(migrated_dsn, schema, refresh=0.3)
        async with app.run_test(size=SIZE) as pilot:
            await step(pilot, key)
            await arrive(pilot, screen_type)
            table = app.screen
            assert isinstance(table, TableScreen)
            assert await until(pilot, lambda: len(table.rows) >= 2), "fewer than two rows"
            await step(pilot, "j")
            if screen_type is FailureGroupsScreen:
                # A group that lasts: charge_card fails for good (retrying groups come and go)
                assert await until(pilot, lambda: any(stable(row) for row in table.rows))
                for _ in range(5):  # rows move with live refreshes: aim again until there
                    if stable(table.current):
                        break
                    rows = list(table.rows)
                    target = next(i for i, row in enumerate(rows) if stable(row))
                    here = rows.index(table.current) if table.current in rows else 0
                    moves = ["j"] * (target - here) if target > here else ["k"] * (here - target)
                    await step(pilot, *moves)
                assert stable(table.current), "the cursor never reached the lasting group"
            chosen = row_key(table)
            assert chosen is not None
            await step(pilot, "enter")
            assert await until(pilot, lambda: isinstance(app.screen, JobsScreen))
            browser = app.screen
            assert isinstance(browser, JobsScreen)
            assert browser.origin == table.TITLE
            assert app.screen_stack[-2] is table  # pushed over it, not the bottom browser
            assert await until(pilot, lambda: "R" in browser.active_bindings)  # mounted
            bindings = browser.active_bindings
            assert bindings["escape"].binding.description == "Back"
            assert bindings["R"].binding.description == "Retry job"  # says whose it is
            await step(pilot, "escape")
            assert await until(pilot, lambda: app.screen is table)
            assert isinstance(table, TableScreen)
            assert row_key(table) == chosen
            await step(pilot, rest=1.0)  # a few live refreshes later: still that row
            assert row_key(table) == chosen
            if screen_type is FailureGroupsScreen:  # R is the group's again
                assert table.active_bindings["R"].binding.action == "retry_group"
            assert_alive(app)


async def test_going_round_does_not_grow_the_stack(migrated_dsn: str, schema: str) -> None:
    async with live_workload(migrated_dsn, schema):
        app = make_app(migrated_dsn, schema, refresh=0.3)
        async with app.run_test(size=SIZE) as pilot:
            depths = []
            for _ in range(4):
                await step(pilot, "Q")
                await arrive(pilot, QueuesScreen)
                queues = app.screen
                assert isinstance(queues, QueuesScreen)
                assert await until(pilot, lambda q=queues: bool(q.rows))  # type: ignore[misc]
                await step(pilot, "enter")
                assert await until(pilot, lambda: isinstance(app.screen, JobsScreen))
                depths.append(len(app.screen_stack))
            assert depths == [depths[0]] * 4, depths


def status_text(app: Any) -> str:
    return text_of(app.screen.query_one("#status", Static))


async def test_id_filter_shows_the_job_on_its_own_tab_and_no_key_is_lost_while_slow(
    migrated_dsn: str, schema: str
) -> None:
    """Keys typed at once after a tab switch, while a lock holds the read up: every one
    reaches the filter, and ``id:N`` lands on job N's own tab, saying its real state."""
    async with (
        live_workload(migrated_dsn, schema),
        await Client.connect(migrated_dsn, schema, read_only=True) as reader,
    ):

        async def failed() -> int | None:
            rows = await reader.list_jobs(state=JobState.FAILED, limit=1)
            return rows[0].id if rows else None

        job_id = await until_async(failed)
        app = make_app(migrated_dsn, schema, refresh=0.3)
        async with app.run_test(size=SIZE) as pilot, connect_once(migrated_dsn) as lock:
            await arrive(pilot, JobsScreen)
            await step(pilot, rest=0.5)
            transaction = lock.transaction()
            await transaction.start()
            await lock.execute(f"LOCK TABLE {schema}.done_entries IN ACCESS EXCLUSIVE MODE")
            keys = ["3", "slash", *f"id:{job_id}", "enter"]
            for key in keys:
                char = CHARS.get(key, "/" if key == "slash" else key if len(key) == 1 else None)
                app.post_message(events.Key(key, char))
            await pilot.pause(0.5)  # the keys are in; the read waits on the lock
            await transaction.rollback()
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            assert await until(pilot, lambda: screen.query_state.job_id == job_id), (
                f"the filter got {screen.query_one('#filter').value!r}"  # type: ignore[attr-defined]
            )
            assert await until(pilot, lambda: screen.query_state.tab == "failed")
            assert await until(pilot, lambda: [j.id for j in screen.table.jobs] == [job_id])
            status = status_text(app)
            assert f"1 failed job with id {job_id}" in status
            assert f"Job {job_id} is failed: shown on its tab, Failed" in status
            assert "running" not in status
            # Another tab: the job is not listed there, and the line says where it is.
            await step(pilot, "3", rest=0.5)
            assert await until(pilot, lambda: screen.query_state.tab == "running")
            assert await until(pilot, lambda: "on the Failed tab (7)" in status_text(app))
            assert "running job" not in status_text(app)
            assert_alive(app)
