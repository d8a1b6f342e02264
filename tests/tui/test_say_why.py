"""Say why: refused keys explain, dialogs name their buttons, one key per tab, narrow terminals."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widgets import Button, DataTable

from awa_tui.app import SESSION_READ_ONLY
from awa_tui.demo import ChargeCard
from awa_tui.errors import EXIT_CONNECT, EXIT_USAGE
from awa_tui.query import tab_named
from awa_tui.screens.base import AwaScreen
from awa_tui.screens.confirm import ConfirmModal, PromptModal
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.dlq import DlqScreen
from awa_tui.screens.error_history import ErrorHistoryScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.output_panel import OutputPanel
from awa_tui.widgets.state_tabs import StateTabs
from storage import Client, JobState
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app, work
from tests.tui.test_cli import assert_one_clean_line, run_cli
from tests.tui.test_complete_form import open_form


def notified(app: Any) -> list[str]:
    return [n.message for n in app._notifications]


async def test_latest_failure_and_its_kept_output_in_four_keys(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """From launch: Failed tab, open the newest, error history, jump to the kept output."""
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        keys = ["7", "enter", "e", "o"]
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        assert len(keys) <= 4
        screen = app.screen
        assert isinstance(screen, ErrorHistoryScreen)
        assert screen.row.id == incident.failed
        panel = text_of(screen.query_one(OutputPanel))
        assert "Output kept by entry #2" in panel
        assert '{"skipped":2,"updated":80,"failed_skus":["SKU-217"]}' in panel


async def test_digits_select_every_tab_and_are_shown(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        expected = {
            "1": "all",
            "4": "waiting_external",
            "7": "failed",
            "0": "dlq",
            "2": "available",
        }
        for key, tab in expected.items():
            await pilot.press(key)
            await settle(pilot)
            assert screen.query_state.tab == tab
        await pilot.press("4")
        await settle(pilot)
        assert [job.id for job in screen.query_one(JobTable).jobs] == [incident.waiting]
        tabs = Content.from_markup(screen.query_one(StateTabs).tabs_markup()).plain
        for label in ("1 All 11", "4 Wait 1", "7 Fail 1", "0 DLQ 1"):  # 120 columns: short
            assert label in tabs


async def test_keys_that_do_not_apply_say_why(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[0])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        for key in ("C", "e", "R"):
            await pilot.press(key)
            await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)  # nothing opened
        messages = notified(app)
        job = incident.emails[0]
        assert f"Job {job} is completed, not waiting for a callback." in messages
        assert f"Job {job} has no errors recorded." in messages
        assert f"Job {job} is completed; only failed or cancelled jobs can be retried." in messages


async def test_write_key_in_read_only_mode_says_why_and_writes_nothing(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.failed, read_only=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)  # no confirmation was offered
        assert SESSION_READ_ONLY in notified(app)
    row = await client.get_job(incident.failed)
    assert row is not None
    assert row.state is JobState.FAILED


async def test_cancel_dialog_buttons_name_what_they_do(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.available)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("X")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        labels = [str(button.label) for button in modal.query(Button)]
        assert labels == ["Cancel job (y)", "Keep (n)"]
        await pilot.click("#cancel")  # "Keep": the job is not cancelled
        await settle(pilot)
    row = await client.get_job(incident.available)
    assert row is not None
    assert row.state is JobState.AVAILABLE


async def test_completing_a_typed_kind_without_output_asks_first(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app)
        await pilot.press("ctrl+l")  # the form opens with the schema's skeleton: clear it
        await settle(pilot)
        await pilot.press("ctrl+s")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        assert "Kind await_payment declares output PaymentResult; complete without an output?" in (
            modal.body
        )
        assert [str(b.label) for b in modal.query(Button)] == [
            "Complete job (y)",
            "Back to the form (n)",
        ]
        await pilot.press("n")
        await settle(pilot)
    row = await client.get_job(incident.waiting)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def test_job_table_at_80x24_keeps_id_kind_state_and_last_error(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("7")
        await settle(pilot)
        table = app.screen.query_one(JobTable)
        assert table.region.right <= 80
        lines = [table.render_line(y).text for y in range(table.size.height)]
        header = lines[0]
        for label in ("id", "kind", "state", "last error"):
            assert f" {label} " in f" {header} ", header
        row = next(line for line in lines[1:] if str(incident.failed) in line)
        for value in ("sync_inventory", "failed", "connection reset"):
            assert value in row, row


async def test_dlq_refreshes_live_and_keeps_the_selection(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, refresh=0.2)
    async with app.run_test(size=SIZE) as pilot:
        # Live refresh keeps starting workers, so wait on what is shown rather than settle.
        await pilot.press("L")
        screen = app.screen
        assert isinstance(screen, DlqScreen)
        for _ in range(500):
            if screen.current is not None:
                break
            await pilot.pause(0.02)
        assert screen.current is not None
        assert screen.current.id == incident.dead
        newer = await client.insert(ChargeCard(order_id=777, amount_cents=700), max_attempts=1)
        await work(client, "payments")
        for _ in range(500):  # bounded wait on the real condition: the timer reloaded the page
            if [row.id for row in screen.rows] == [newer.id, incident.dead]:
                break
            await pilot.pause(0.02)
        else:
            raise AssertionError("the DLQ screen never showed the new entry")
        await pilot.pause()
        assert screen.current is not None
        assert screen.current.id == incident.dead  # the selection stayed on its entry
        assert screen.query_one(DataTable).cursor_row == 1


def test_state_names_and_the_waiting_alias() -> None:
    assert tab_named("waiting") == "waiting_external"
    assert tab_named("Waiting_External") == "waiting_external"
    assert tab_named("DLQ") == "dlq"
    assert tab_named("sleeping") is None


def test_cli_accepts_state_waiting_and_refuses_unknown_states_in_one_line() -> None:
    unknown = run_cli("--state", "sleeping")
    assert unknown.returncode == EXIT_USAGE
    line = assert_one_clean_line(unknown)
    assert "all, available, running, waiting, scheduled" in line
    # A known state gets past argument checks to the connection (nothing listens on port 1).
    known = run_cli("--state", "waiting", "--dsn", "postgresql://nobody@127.0.0.1:1/none")
    assert known.returncode == EXIT_CONNECT, known.stderr


async def test_fail_callback_dialog_buttons_name_what_they_do(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("F")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, PromptModal)
        labels = [str(button.label) for button in modal.query(Button)]
        assert labels == ["Fail job (enter)", "Keep waiting (esc)"]
        await pilot.press("escape")
        await settle(pilot)
    row = await client.get_job(incident.waiting)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def test_every_screens_writes_are_hidden_and_say_why_in_read_only_mode(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """One rule for every screen (``AwaScreen.refusal``): each write it declares leaves the
    footer and its key says the session is read-only. ``t`` on Schedules once did not."""
    from awa_tui.app import JUMPS

    app = build_app(migrated_dsn, schema, initial_job=incident.failed, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)  # the job's detail, then every other
        screens: list[type[AwaScreen]] = [JobsScreen, *JUMPS]
        for screen_type in screens:
            await app.push_screen(screen_type())
            await settle(pilot)
        for screen in app.screen_stack[1:]:
            assert isinstance(screen, AwaScreen)
            assert screen.WRITE_ACTIONS or type(screen) not in (JobsScreen, JobDetailScreen)
            for action in screen.WRITE_ACTIONS:
                assert screen.refusal(action) == SESSION_READ_ONLY, (type(screen), action)
                assert screen.check_action(action, ()) is False, (type(screen), action)
