"""Typed keys reach the console in the order typed, each where the focus is when it is handled
(``awa_tui.key_line``)."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Input, Static

from awa_tui.app import make_app
from tests.tui.conftest import settle, until
from tests.tui.live import arrive, back_to_jobs
from tests.tui.scenarios import SIZE, Incident, build_app


class Mover(Static, can_focus=True):
    """On ``a``: moves the focus to the input and, right then, the next key arrives (as one
    typed that instant would), while ``a`` is still on its way back up to the app."""

    def on_key(self, event: events.Key) -> None:
        if event.key == "a":
            self.screen.query_one(Input).focus()
            self.app.post_message(events.Key("b", "b"))


class TwoWidgets(Screen[None]):
    def compose(self) -> ComposeResult:
        yield Mover("mover", id="mover")
        yield Input(id="typed")

    def on_mount(self) -> None:
        self.query_one(Mover).focus()


async def test_a_key_sent_again_after_the_focus_moved_is_not_overtaken(
    migrated_dsn: str, schema: str
) -> None:
    """``a`` was sent to the widget that had the focus; it moved the focus, and ``b`` came
    meanwhile. ``a`` goes again into the input, and ``b`` after it: "ab", not "ba"."""
    app = make_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(TwoWidgets())
        await pilot.pause()
        assert isinstance(app.focused, Mover)
        app.post_message(events.Key("a", "a"))
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.query_one(Input).value == "ab"


async def test_keys_typed_in_a_burst_keep_their_order_across_screens(
    migrated_dsn: str, schema: str
) -> None:
    """Q opens Queues, esc closes it, K opens Kinds: typed at once, they end on Kinds with
    Queues closed, whatever each screen's loading does meanwhile."""
    from awa_tui.screens.jobs import JobsScreen
    from awa_tui.screens.kinds import KindsScreen

    app = make_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        while not isinstance(app.screen, JobsScreen):
            await pilot.pause()
        for key in ("Q", "escape", "K"):
            app.post_message(events.Key(key, None if key == "escape" else key))
        for _ in range(200):
            if isinstance(app.screen, KindsScreen):
                break
            await pilot.pause(0.01)
        await pilot.pause()
        assert [type(s).__name__ for s in app.screen_stack[1:]] == ["JobsScreen", "KindsScreen"]


async def test_enter_typed_with_a_tab_key_opens_that_tabs_first_job(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """``7⏎`` typed at once: the Enter comes while the Failed tab's page is loading and the
    table is empty; it opens the tab's first job when the page comes, as it would had the
    person waited (it used to do nothing). A tab key typed after it cancels that."""
    from awa_tui.screens.detail import JobDetailScreen
    from awa_tui.screens.jobs import JobsScreen

    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await arrive(pilot, JobsScreen)
        browser = app.screen
        assert isinstance(browser, JobsScreen)
        assert await until(pilot, lambda: browser.shown_query == browser.query_state)
        for key, character in (("7", "7"), ("enter", "\r")):
            app.post_message(events.Key(key, character))
        await arrive(pilot, JobDetailScreen)
        assert isinstance(app.screen, JobDetailScreen)
        assert app.screen.job_id == incident.failed

        await back_to_jobs(pilot)
        for key, character in (("1", "1"), ("enter", "\r"), ("8", "8")):
            app.post_message(events.Key(key, character))
        assert await until(
            pilot,
            lambda: browser.shown_query is not None and browser.shown_query.tab == "completed",
        )
        await settle(pilot)
        assert isinstance(app.screen, JobsScreen)


async def test_a_key_typed_before_the_detail_loaded_runs_once_it_has(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """``⏎e`` typed at once: ``e`` reaches the detail before its job is loaded, when it does not
    apply yet ("The job is not loaded."). It waits for the load and opens the error history,
    as it would had the person waited."""
    from awa_tui.screens.error_history import ErrorHistoryScreen
    from awa_tui.screens.jobs import JobsScreen

    app = build_app(migrated_dsn, schema, initial_state="failed")
    async with app.run_test(size=SIZE) as pilot:
        await arrive(pilot, JobsScreen)
        browser = app.screen
        assert isinstance(browser, JobsScreen)
        assert await until(pilot, lambda: bool(browser.table.jobs))
        for key, character in (("enter", "\r"), ("e", "e")):
            app.post_message(events.Key(key, character))
        await arrive(pilot, ErrorHistoryScreen)
        assert not app._notifications, [n.message for n in app._notifications]


async def test_enter_on_an_empty_page_says_there_is_no_job(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    from awa_tui.screens.jobs import JobsScreen

    app = build_app(migrated_dsn, schema, initial_kind="no_such_kind")
    async with app.run_test(size=SIZE) as pilot:
        await arrive(pilot, JobsScreen)
        browser = app.screen
        assert isinstance(browser, JobsScreen)
        assert await until(pilot, lambda: browser.shown_query == browser.query_state)
        assert not browser.table.jobs
        await pilot.press("enter")
        assert await until(pilot, lambda: bool(app._notifications))
        assert [n.message for n in app._notifications] == ["No job is selected."]
        assert isinstance(app.screen, JobsScreen)
