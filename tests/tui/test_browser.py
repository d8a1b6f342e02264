"""The job browser: tabs with counts, the filter, keyset pages, live refresh, marks, bulk writes."""

from __future__ import annotations

from awa_tui.demo import SendEmail
from awa_tui.query import tab_of
from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.jobs import PAGE_SIZE, JobsScreen
from awa_tui.screens.pickers import BulkActionModal
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.mode_banner import ModeBanner
from awa_tui.widgets.state_tabs import StateTabs
from storage import Client, JobState, ReadOnlyError
from tests.tui.conftest import settle, text_of, wait_for_screen
from tests.tui.scenarios import SIZE, Incident, build_app


def jobs_screen(app: object) -> JobsScreen:
    screen = getattr(app, "screen", None)
    assert isinstance(screen, JobsScreen)
    return screen


def shown_ids(screen: JobsScreen) -> list[int]:
    return [job.id for job in screen.query_one(JobTable).jobs]


async def test_tabs_show_live_counts_and_filter_by_state(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=(160, 36)) as pilot:  # wide enough for the full labels
        await settle(pilot)
        screen = jobs_screen(app)
        tabs = text_of(screen.query_one(StateTabs))
        for label in (
            "All 11",
            "Available 1",
            "Waiting 1",
            "Scheduled 1",
            "Retryable 1",
            "Failed 1",
        ):
            assert label in tabs
        assert "Completed 5" in tabs
        assert "Cancelled 1" in tabs
        assert "DLQ 1" in tabs
        assert shown_ids(screen) == [12, 11, 10, 9, 8, 7, 5, 4, 3, 2, 1]  # newest first
        await pilot.press("left_square_bracket")  # wraps to the DLQ tab
        await settle(pilot)
        assert screen.query_state.tab == "dlq"
        assert shown_ids(screen) == [incident.dead]
        await pilot.press("right_square_bracket", "right_square_bracket")
        await settle(pilot)
        assert screen.query_state.tab == "available"
        assert shown_ids(screen) == [incident.available]


async def test_filter_bar_kind_queue_id_and_text(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        await pilot.press("slash", *"queue:mail", "enter")
        await settle(pilot)
        assert shown_ids(screen) == [11, 8, 3, 2, 1]
        assert screen.query_one(JobTable).has_focus

        await pilot.press("slash", "ctrl+u", *"kind:send_email id:3", "enter")
        await settle(pilot)
        assert shown_ids(screen) == [3]
        job = screen.query_one(JobTable).jobs[0]
        assert screen.query_state.tab == tab_of(job)  # id: shows the job on its own tab

        await pilot.press("1", "slash", "ctrl+u", *"eu-3", "enter")
        await settle(pilot)
        assert shown_ids(screen) == [incident.failed]  # free text searches args

        await pilot.press("slash", "ctrl+u", *"id:zz", "enter")
        await settle(pilot)
        assert shown_ids(screen) == [incident.failed]  # refused; the previous view stays
        assert screen.query_state.search == "eu-3"

        await pilot.press("escape", "escape")  # leave the filter, then clear it
        await settle(pilot)
        assert screen.query_state.filter_text == ""
        assert len(shown_ids(screen)) == 11


async def test_keyset_pages_newest_first(migrated_dsn: str, schema: str, client: Client) -> None:
    client.job_kind_descriptor("send_email")  # a known kind, whatever ran before this test
    await client.sync_descriptors()
    await client.insert_many(
        [SendEmail(to=f"u{n}@example.com", template="t") for n in range(130)], kind="send_email"
    )
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        assert shown_ids(screen) == list(range(130, 130 - PAGE_SIZE, -1))
        assert screen.has_more
        await pilot.press("n")
        await settle(pilot)
        assert shown_ids(screen) == list(range(130, 130 - 2 * PAGE_SIZE, -1))
        await pilot.press("end")  # to the last row: the next page loads by itself
        await settle(pilot)
        assert shown_ids(screen) == list(range(130, 0, -1))
        assert not screen.has_more
        assert "130 jobs shown" in text_of(screen.query_one("#status"))


async def test_live_refresh_never_moves_the_cursor_or_marks(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, refresh=1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        assert not screen.paused
        await pilot.press("j", "j", "j")  # onto job 9
        await pilot.press("space")  # mark 9; the cursor moves on to 8
        table = screen.query_one(JobTable)
        assert table.current_job is not None
        assert table.current_job.id == incident.available
        await client.insert_many([SendEmail(to="new@example.com", template="t")] * 3)
        screen.action_refresh()
        await settle(pilot)
        assert shown_ids(screen)[:3] == [15, 14, 13]
        assert table.current_job is not None
        assert table.current_job.id == incident.available
        assert screen.marks == {incident.scheduled}
        assert "●" in text_of(table.get_row(str(incident.scheduled))[0])
        await pilot.press("p")
        assert screen.paused
        await pilot.press("minus")
        assert screen.interval == 2.0


async def test_bulk_cancel_on_marked_rows(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    extra = await client.insert_many(
        [SendEmail(to=f"x{n}@example.com", template="t") for n in range(2)]
    )
    app = build_app(migrated_dsn, schema, initial_state="available")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        assert shown_ids(screen) == [extra[1].id, extra[0].id, incident.available]
        await pilot.press("space", "space", "X")
        await settle(pilot)
        confirm = app.screen
        assert isinstance(confirm, ConfirmModal)
        assert "the 2 marked jobs" in confirm.title_text
        await pilot.press("y")
        await settle(pilot)
        for row in extra:
            stored = await client.get_job(row.id)
            assert stored is not None
            assert stored.state is JobState.CANCELLED
        untouched = await client.get_job(incident.available)
        assert untouched is not None
        assert untouched.state is JobState.AVAILABLE
        assert shown_ids(screen) == [incident.available]
        assert screen.marks == set()


async def test_bulk_on_everything_matching_shows_the_count_first(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    await client.insert_many([SendEmail(to=f"y{n}@example.com", template="t") for n in range(4)])
    app = build_app(migrated_dsn, schema, initial_state="available", initial_kind="send_email")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("A")
        await wait_for_screen(pilot, BulkActionModal)
        await pilot.press("enter")  # the first choice on the available tab: cancel
        confirm = await wait_for_screen(pilot, ConfirmModal)
        assert confirm.title_text == "Cancel 5 available jobs of kind send_email?"
        assert confirm.body.startswith("Counted just now.")
        await pilot.press("y")
        await settle(pilot)
        counts = await client.counts()
        assert counts.by_state[JobState.AVAILABLE] == 0
        assert counts.by_state[JobState.CANCELLED] == 6


async def test_read_only_mode_hides_writes_and_the_session_refuses_them(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        assert "READ-ONLY" in text_of(screen.query_one(ModeBanner))
        shown = {b.binding.action for b in screen.active_bindings.values()}
        assert not {"retry", "cancel", "delete", "bulk_matching"} & shown
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, JobsScreen)  # no confirmation: the key does nothing
        client = await app.client()
        try:
            await client.cancel_job(incident.available)
        except ReadOnlyError:
            pass
        else:
            raise AssertionError("a read-only session accepted a write")


async def test_a_read_only_database_is_detected(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    separator = "&" if "?" in migrated_dsn else "?"
    replica_like = f"{migrated_dsn}{separator}default_transaction_read_only=on"
    app = build_app(replica_like, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.read_only_reason is not None
        assert "database is read-only" in app.read_only_reason
        assert "READ-ONLY" in text_of(jobs_screen(app).query_one(ModeBanner))


async def test_a_count_above_the_cap_shows_as_at_least(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """With the cap at 3, Completed (5 jobs) says ``3+``, and All (11 jobs) the sum of what is
    known, ``9+``: at least 9; Failed and Available (1 each) are exact."""

    async def capped_client() -> Client:
        client = await Client.connect(migrated_dsn, schema)
        client.count_cap = 3
        return client

    app = build_app(migrated_dsn, schema, client_factory=capped_client)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = text_of(jobs_screen(app).query_one(StateTabs))
        assert "All 9+" in tabs
        assert "Done 3+" in tabs  # 120 columns: the short labels
        assert "Fail 1 " in tabs
        assert "Avail 1 " in tabs


async def test_the_all_tab_says_when_dead_lettered_jobs_also_match_its_filter(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """All leaves the DLQ out, so a search there could answer "No jobs" for an error text only
    a dead-lettered job has; the status line points to the DLQ tab with their number."""
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        await pilot.press("slash", *"insufficient_funds", "enter")
        await settle(pilot)
        assert shown_ids(screen) == []
        status = text_of(screen.query_one("#status"))
        assert "1 dead-lettered also match: DLQ tab (0)" in status
        await pilot.press("0")
        await settle(pilot)
        assert len(shown_ids(screen)) == 1
        assert "dead-lettered also match" not in text_of(screen.query_one("#status"))


async def test_tabs_shorten_to_stay_on_one_line_in_a_narrow_terminal(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """120 columns: short labels, keys kept; 80: the keys go too; never a second line."""
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = jobs_screen(app).query_one(StateTabs)
        assert tabs.size.height == 1
        assert "[dim]2[/] Avail 1" in text_of(tabs)
        assert "[dim]8[/] Done 5" in text_of(tabs)
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert tabs.size.height == 1
        assert "Avail 1" in text_of(tabs)
        assert "[dim]2[/]" not in text_of(tabs)


async def test_the_status_line_counts_one_job_in_the_singular(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5")  # the incident has one scheduled job
        await settle(pilot)
        status = text_of(jobs_screen(app).query_one("#status"))
        assert "1 scheduled job shown" in status, status
