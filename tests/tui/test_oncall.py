"""The on-call views: Q (queues, pause and resume) and G (failure groups, group actions)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.failure_groups import FailureGroupsScreen, search_text
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.queues import QueuesScreen, sparkline_text
from awa_tui.screens.timeline import TimelineScreen
from awa_tui.widgets.job_table import JobTable
from storage import Client, ConnectionFailed, Job, JobState
from tests.tui.conftest import open_timeline, settle, text_of, wait_for_screen
from tests.tui.scenarios import SIZE, Incident, build_app


def rows_of(table: DataTable[Any]) -> dict[str, list[str]]:
    return {
        text_of(table.get_row_at(i)[0]): [text_of(c) for c in table.get_row_at(i)]
        for i in range(table.row_count)
    }


async def paused(client: Client, queue: str) -> bool:
    return any(q.paused for q in await client.list_queues() if q.queue == queue)


async def test_queues_screen_shows_depth_and_pauses_and_resumes_with_confirmation(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("Q")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        table = screen.query_one(DataTable)
        rows = rows_of(table)
        assert rows["mail"][1] == "active"
        assert rows["mail"][4] == "1"  # available
        assert rows["webhooks"][6] == "1"  # waiting
        assert rows["default"][8] == "1"  # retryable
        names = list(rows)
        table.move_cursor(row=names.index("mail"))
        await pilot.press("p")
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        assert modal.title_text == "Pause queue mail?"
        await pilot.press("y")
        await settle(pilot)
        assert await paused(client, "mail")
        assert rows_of(table)["mail"][1] == "paused"
        assert "1 paused" in text_of(screen.query_one("#queues-head"))
        assert "Paused since" in text_of(screen.query_one("#queue-summary"))
        await pilot.press("p", "n")  # backed out: still paused
        await settle(pilot)
        assert await paused(client, "mail")
        await pilot.press("p", "y")
        await settle(pilot)
        assert not await paused(client, "mail")
        await pilot.press("enter")
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        assert jobs.query_state.queue == "mail"


async def test_pause_is_refused_with_the_reason_in_read_only_mode(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, read_only=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("Q")
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, QueuesScreen)
        assert any("Read-only session" in n.message for n in app._notifications)
        assert not await paused(client, "default")


async def test_queues_screen_keeps_its_rows_marked_stale_while_the_connection_is_lost(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("Q")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        before = screen.query_one(DataTable).row_count
        # No pause before the checks: the app's health probe would find the (reachable)
        # database and mark the connection back, which made this test flaky under load.
        app.note_lost(ConnectionFailed("PostgreSQL at db:5432 is unreachable."))
        assert "stale" in text_of(screen.query_one("#queues-head"))
        assert screen.query_one(DataTable).row_count == before
        app.note_read()
        await settle(pilot)
        assert "stale" not in text_of(screen.query_one("#queues-head"))


async def test_twelve_smtp_failures_are_one_group_of_twelve_and_retry_together(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    @client.task(kind="send_mail", queue="mail")
    async def send(job: Job[dict[str, Any]]) -> None:
        raise ConnectionError(f"smtp refused for tenant {job.args['tenant']}")

    await client.insert_many([{"tenant": n} for n in range(12)], kind="send_mail", max_attempts=1)
    await client.run_until_idle(["mail"])
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("G")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, FailureGroupsScreen)
        (row,) = rows_of(screen.query_one(DataTable)).values()
        assert row[:2] == ["12", "send_mail"]
        assert row[-1] == "ConnectionError: smtp refused for tenant <n>"  # signature last
        await pilot.press("enter")
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        assert (jobs.query_state.kind, jobs.query_state.search) == (
            "send_mail",
            "smtp refused for tenant",
        )
        assert len(jobs.query_one(JobTable).jobs) == 12
        assert "tab counts ignore kind/queue/id/text" in text_of(jobs.query_one("#status"))
        await pilot.press("G")
        await settle(pilot)
        await pilot.press("R")  # its worker lists the group, then waits on the confirmation
        modal = await wait_for_screen(pilot, ConfirmModal)
        assert modal.title_text == "Retry 12 jobs of this group?"
        await pilot.press("y")
        await settle(pilot)
        states = {row.state for row in await client.list_jobs(kind="send_mail")}
        assert states == {JobState.AVAILABLE}
        assert await client.failure_groups() == []
        assert "Nothing is failing." in text_of(app.screen.query_one("#group-summary"))


async def test_enter_on_a_dead_lettered_group_opens_the_dlq_tab_with_its_jobs(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    """The All tab does not list dead-lettered jobs: a group that lives in the DLQ opens there,
    or the browser would show an empty page for a group of four."""

    @client.task(kind="charge", queue="payments")
    async def charge(job: Job[dict[str, Any]]) -> None:
        raise ValueError(f"card declined for order {job.args['order']}")

    await client.configure_queue("payments", dlq=True)
    await client.insert_many([{"order": n} for n in range(4)], kind="charge", max_attempts=1)
    await client.run_until_idle(["payments"])
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("G")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, FailureGroupsScreen)
        assert screen.current is not None
        assert screen.current.dead_lettered == 4
        await pilot.press("enter")
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        assert jobs.query_state.tab == "dlq"
        assert len(jobs.query_one(JobTable).jobs) == 4


async def test_group_keys_say_why_they_do_not_apply(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("G")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, FailureGroupsScreen)
        assert screen.current is not None
        assert screen.current.retryable == 1  # upstream timed out: a retryable job only
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, FailureGroupsScreen)
        assert any("no failed or dead-lettered job" in n.message for n in app._notifications)


def test_search_text_is_the_signatures_longest_literal_run() -> None:
    assert search_text("ConnectionError: smtp refused for tenant <n>") == "smtp refused for tenant"
    assert search_text("RuntimeError: key <str> missing in <n> of <n>") == "missing in"
    assert search_text("no class <n> here") == "no class"


def test_sparkline_scales_to_the_busiest_bucket_and_dots_an_idle_hour() -> None:
    assert sparkline_text([0] * 60).plain == "·" * 30
    line = sparkline_text([0] * 58 + [5, 5]).plain
    assert line[-1] == "█"
    assert set(line[:-1]) == {" "}


async def test_t_in_the_job_detail_shows_each_attempt_and_how_it_ended(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.failed)
    async with app.run_test(size=SIZE) as pilot:
        screen, rows = await open_timeline(pilot)
        assert [(r["attempt"], r["outcome"]) for r in rows] == [
            ("1", "failed, retried"),
            ("2", "failed, retried"),
            ("3", "failed"),
        ]
        assert rows[2]["error"].startswith("RuntimeError: connec")
        await pilot.press("j", "j")
        await settle(pilot)
        assert "exhausted" in text_of(screen.query_one("#tl-note"))
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, TimelineScreen)
