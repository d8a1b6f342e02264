"""The detail compares a completed output with the failed attempt's kept one (stacked, or a
diff, one key apart), says under each output where it came from and when it goes, and names
the one reason when there is none."""

from __future__ import annotations

import asyncpg

from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.error_history import ErrorHistoryScreen
from awa_tui.widgets.output_compare import OutputCompare
from awa_tui.widgets.output_panel import OutputPanel
from storage import Client
from tests.tui.conftest import settle, text_of, until
from tests.tui.scenarios import SIZE, Incident, build_app, pin, seed_retried


def detail(app: object) -> JobDetailScreen:
    screen = getattr(app, "screen", None)
    assert isinstance(screen, JobDetailScreen)
    return screen


async def test_d_toggles_both_outputs_stacked_and_their_diff(
    migrated_dsn: str, schema: str, incident: Incident, client: Client, conn: asyncpg.Connection
) -> None:
    job_id = await seed_retried(client, conn)
    await pin(conn)
    app = build_app(migrated_dsn, schema, initial_job=job_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        compare = screen.query_one(OutputCompare)
        completed = text_of(screen.query_one("#output", OutputPanel))
        assert '"updated":412' in completed
        assert "Attempt 2 at" in completed
        assert "by its handler, general path · pruned with its queue slot at ~" in completed
        assert "d diff" in completed
        kept = screen.query_one("#kept-output", OutputPanel)
        assert compare.display
        assert compare.view == "stacked"
        assert kept.display
        kept_text = text_of(kept)
        assert '"skipped":412' in kept_text
        assert "Attempt 1 at" in kept_text
        assert "kept in error entry #1 of the job's payload" in kept_text
        footer = screen.active_bindings["d"].binding
        assert (footer.description, footer.show) == ("Diff/stacked", True)
        assert screen.check_action("compare", ()) is True

        await pilot.press("d")
        assert await until(pilot, lambda: compare.view == "diff")
        await settle(pilot)
        assert not kept.display
        diff = text_of(compare.query_one(".compare-diff"))
        assert "Diff from kept by entry #1 to the completed output" in diff
        for line in ("~ $.updated  0 → 412", '~ $.status   "partial" → "ok"', "+ $.batches  [1,2]"):
            assert line in diff, line

        await pilot.press("d")
        assert await until(pilot, lambda: compare.view == "stacked")
        assert kept.display

        await pilot.press("e")  # the error history says the same under the kept output
        await settle(pilot)
        history = app.screen
        assert isinstance(history, ErrorHistoryScreen)
        entry = text_of(history.query_one(OutputPanel))
        assert "Attempt 1 at" in entry
        assert "kept in error entry #1 of the job's payload" in entry


async def test_compare_does_not_apply_without_both_outputs(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.resized)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        assert not screen.query_one(OutputCompare).display
        assert screen.binding_reason("compare") == (
            f"Job {incident.resized} has no completed output beside a failed attempt's kept one."
        )
        await pilot.press("d")
        await settle(pilot)
        assert screen.query_one(OutputCompare).view == "stacked"  # refused: nothing toggled


async def test_the_why_line_names_the_one_cause(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    """A deleted compact completion is hidden, with when its bytes go; a job that completed
    without one says the handler recorded none (not a list of possibilities)."""
    await client.delete_job(incident.emails[2])
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[2])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        why = text_of(detail(app).query_one("#output", OutputPanel))
        assert "Deleted at " in why
        assert ": hidden, bytes stay until prune at ~" in why
        assert "more turns of the queue ring, every 15 min" in why
        await pilot.press("escape")
        app.open_job(incident.untyped)
        await settle(pilot)
        why = text_of(detail(app).query_one("#output", OutputPanel))
        assert "The handler recorded none (set_output)." in why
        assert "external" not in why
