"""Layouts adapt to width (``awa_tui.widgets.widths``): at 80 columns the columns that answer
the screen's question stay (a failure group's signature, a queue's lag, a job's id) and two
signatures that differ late never read the same; at 200 the last error and the signature get
their room; a callback id is never cut."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from rich.console import Console
from textual.widgets import DataTable

from awa_tui.screens.failure_groups import FailureGroupsScreen
from awa_tui.screens.queues import QueuesScreen
from awa_tui.widgets.job_summary import summary_table
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.widths import cut
from storage import Client, Job
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import Incident, build_app, work

NARROW, WIDE = (80, 24), (200, 50)
LATE = "upstream inventory service did not answer in time while syncing the stock levels of "
"""Two failures whose messages differ only after these 84 characters."""


class Sync(BaseModel):
    region: str


async def fail_late(client: Client) -> None:
    @client.task(Sync, queue="stock")
    async def sync(job: Job[Sync]) -> None:
        raise RuntimeError(LATE + job.args.region)

    for region in ("north", "south"):
        await client.insert(Sync(region=region), queue="stock", max_attempts=1)
        await work(client, "stock")


def column_keys(table: DataTable[Any]) -> list[str]:
    return [str(key.value) for key in table.columns]


def cells_of(table: DataTable[Any], key: str) -> list[str]:
    return [text_of(cell) for cell in table.get_column(key)]


def fits(table: DataTable[Any], width: int) -> bool:
    """No column runs past the terminal: their widths and padding add up within it."""
    return sum(c.get_render_width(table) for c in table.columns.values()) <= width


def test_cut_keeps_both_ends() -> None:
    a, b = (cut(LATE + end, 40, middle=True) for end in ("north", "south"))
    assert a != b
    assert len(a) == 40
    assert a.startswith("upstream inventory")
    assert a.endswith("north")
    assert cut("short", 40) == "short"
    assert cut(LATE, 20) == LATE[:19] + "…"  # the start only, unless asked


async def test_failure_groups_keep_their_signatures_apart_at_80_and_whole_at_200(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    await fail_late(client)
    for size in (NARROW, WIDE):
        app = build_app(migrated_dsn, schema)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await pilot.press("G")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, FailureGroupsScreen)
            table = screen.query_one(DataTable)
            assert "signature" in column_keys(table)
            assert fits(table, size[0])
            signatures = cells_of(table, "signature")
            assert len(set(signatures)) == len(signatures) == 2, signatures
            if size == WIDE:
                assert f"RuntimeError: {LATE}north" in signatures
                assert "first" in column_keys(table)
            else:
                assert "first" not in column_keys(table)  # dropped, so the signature has room


async def test_queues_keep_the_lag_at_80(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    for size in (NARROW, WIDE):
        app = build_app(migrated_dsn, schema)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await pilot.press("Q")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, QueuesScreen)
            table = screen.query_one(DataTable)
            keys = column_keys(table)
            assert keys[:4] == ["queue", "state", "lag", "f1h"]
            assert fits(table, size[0])
            assert ("spark" in keys) is (size == WIDE)
            assert ("c1h" in keys) is (size == WIDE)


async def test_the_browser_keeps_the_id_at_80_and_gives_the_last_error_its_room_at_200(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    await fail_late(client)
    for size in (NARROW, WIDE):
        app = build_app(migrated_dsn, schema, initial_state="failed")
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            table = app.screen.query_one(JobTable)
            keys = column_keys(table)
            assert "id" in keys
            assert fits(table, size[0])
            errors = cells_of(table, "error")
            assert len(errors) == 2
            if size == WIDE:  # the room left (over 100 cells), not stopped at 60
                assert all(len(e) > 100 for e in errors), errors
                assert any(e.startswith(f"RuntimeError: {LATE[:55]}") for e in errors)
            else:  # kind narrows, queue, att and when leave: the error keeps the rest
                assert "queue" not in keys
                assert all(len(error) >= 24 for error in errors), errors


async def test_a_callback_id_is_never_cut_at_80(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    """The detail's summary, rendered 80 and 60 cells wide: the id stays on one line, whole."""
    row = await client.get_job(incident.waiting)
    assert row is not None
    assert row.callback is not None
    for width in (80, 60):
        console = Console(width=width, record=True, color_system=None)
        with console.capture() as capture:
            console.print(summary_table(row, None, row.created_at))
        lines = capture.get().splitlines()
        assert any(row.callback.callback_id in line for line in lines), lines
