"""The browser's time filter (``since:``/``before:``), its sort keys (``s``, ``o``) and what
the status line and the tab counts say about them."""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from awa_tui.demo import AwaitPayment, SendEmail
from awa_tui.screens.jobs import PAGE_SIZE
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.state_tabs import StateTabs
from storage import Client, JobState
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import FIXED_NOW, SIZE, Incident, build_app, work
from tests.tui.test_browser import jobs_screen, shown_ids
from tests.tui.test_detail import detail


def status(app: object) -> str:
    return text_of(jobs_screen(app).query_one("#status"))


def header(table: JobTable, key: str) -> str:
    return next(str(column.label) for column in table.ordered_columns if column.key == key)


async def test_since_filters_each_tab_and_the_counts_follow(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    since = FIXED_NOW - timedelta(minutes=75)
    completed = [r.id for r in await client.list_jobs(state="completed", since=since)]
    every = [r.id for r in await client.list_jobs(state="completed")]
    assert 0 < len(completed) < len(every)  # the pinned history straddles the moment
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        await pilot.press("8", "slash", *"since:75m", "enter")
        await settle(pilot)
        assert screen.query_state.since == "75m"
        assert shown_ids(screen) == completed
        assert f"Done {len(completed)}" in text_of(screen.query_one(StateTabs))
        assert "tab counts: this time range" in status(app)

        await pilot.press("slash", "ctrl+u", *"since:75m kind:send_email", "enter")
        await settle(pilot)
        assert "tab counts ignore kind/queue/id/text (they follow the time range)" in status(app)

        await pilot.press("slash", "ctrl+u", *"before:75m", "enter")  # older than 75 minutes
        await settle(pilot)
        assert sorted(shown_ids(screen) + completed) == sorted(every)


async def test_a_bad_time_or_sort_value_says_why_and_keeps_the_filter(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        await pilot.press("slash", *"queue:mail", "enter")
        await settle(pilot)
        before = (screen.query_state, shown_ids(screen))
        for text in ("since:soon", "before:2026-13-01", "sort:size", "sort:attempts"):
            await pilot.press("slash", "ctrl+u", *text, "enter")
            await settle(pilot)
            assert (screen.query_state, shown_ids(screen)) == before, text
            assert "The previous filter stays" in status(app), text
        assert "All jobs cannot be sorted by attempts" in status(app)
        await pilot.press("slash", "ctrl+u", *"since:soon", "enter")
        await settle(pilot)
        assert "since:soon is not a duration (30s, 15m, 1h, 2d, 1w) or an ISO date" in status(app)


async def test_s_cycles_the_orders_the_tab_serves_and_o_reverses(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        table = screen.query_one(JobTable)
        await pilot.press("8", "s")  # completed: by finish time, latest first
        await settle(pilot)
        assert screen.query_state.sort.text == "-when"
        expected = [r.id for r in await client.list_jobs(state="completed", sort="-when")]
        assert shown_ids(screen) == expected
        assert "by finish time, latest first" in status(app)
        assert "sort:-when" in screen.query_state.filter_text
        assert header(table, "time") == "when ▼"
        assert header(table, "id") == "id"

        await pilot.press("o")
        await settle(pilot)
        assert shown_ids(screen) == list(reversed(expected))
        assert "earliest first" in status(app)
        assert header(table, "time") == "when ▲"

        await pilot.press("s")  # no attempts for history, no oldest id first: newest first
        await settle(pilot)
        assert screen.query_state.sort.text == "-id"
        await pilot.press("o")  # refused, saying why
        await settle(pilot)
        assert screen.query_state.sort.text == "-id"
        assert "cannot be listed oldest id first" in status(app)

        await pilot.press("2", "s", "s")  # available: by time, then by attempts
        await settle(pilot)
        assert screen.query_state.sort.text == "-attempts"
        await pilot.press("7")  # failed jobs have no attempts order: back to newest first
        await settle(pilot)
        assert screen.query_state.sort.text == "-id"
        assert "Sorted newest first: Failed jobs cannot be sorted by attempts" in status(app)
        assert shown_ids(screen) == [incident.failed]


async def test_keyset_pages_follow_the_sort(migrated_dsn: str, schema: str, client: Client) -> None:
    client.job_kind_descriptor("send_email")
    await client.sync_descriptors()
    for start in range(0, 120, 40):  # three inserts: three run_at values, ties within each
        await client.insert_many(
            [SendEmail(to=f"u{n}@example.com", template="t") for n in range(start, start + 40)],
            kind="send_email",
        )
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        await pilot.press("2", "s", "o")  # available, by run-at time, earliest first
        await settle(pilot)
        assert len(shown_ids(screen)) == PAGE_SIZE
        await pilot.press("end")  # the next pages load as the cursor reaches the last row
        await settle(pilot)
        await pilot.press("end")
        await settle(pilot)
        expected = await client.list_jobs(state=JobState.AVAILABLE, sort="when", limit=500)
        assert shown_ids(screen) == [r.id for r in expected]
        assert len(expected) == 120
        assert not screen.has_more


async def test_a_waiting_jobs_when_is_the_claim_time_its_filter_and_sort_use(
    migrated_dsn: str, schema: str, incident: Incident, client: Client, conn: asyncpg.Connection
) -> None:
    """Two waiting jobs whose deadlines run the other way round from their claim times: the
    when column shows the claim times, in the order sort:-when puts them, and since: keeps the
    one claimed inside the range; the deadline is in the detail screen."""
    later = await client.insert(AwaitPayment(order_id=902, provider="adyen"))
    await work(client, "webhooks")
    claimed, due = FIXED_NOW - timedelta(minutes=10), FIXED_NOW + timedelta(minutes=5)
    await conn.execute(
        "UPDATE claim_batches SET claimed_at = $2 WHERE $1 = ANY(job_ids)", later.id, claimed
    )
    await conn.execute(
        "UPDATE attempt_state SET callback_timeout_at = $2 WHERE job_id = $1", later.id, due
    )
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = jobs_screen(app)
        table = screen.query_one(JobTable)

        def when_cells() -> list[str]:
            return [str(table.get_cell(str(job_id), "time")) for job_id in shown_ids(screen)]

        await pilot.press("4", "slash", *"sort:-when", "enter")
        await settle(pilot)
        assert shown_ids(screen) == [later.id, incident.waiting]
        assert when_cells() == ["10m ago", "1h24m ago"]  # claimed 08:06, by the pinned clock
        assert "by claim time, latest first" in status(app)

        await pilot.press("slash", "ctrl+u", *"since:1h", "enter")
        await settle(pilot)
        assert (shown_ids(screen), when_cells()) == ([later.id], ["10m ago"])

        await pilot.press("enter")
        await settle(pilot)
        summary = text_of(detail(app).query_one("#summary"))
        assert "times out 2026-03-14 09:35:00Z (in 5m)" in summary
