"""The job detail: summary, typed output, absence explanations, copy/save, and the writes."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import orjson
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.widgets.output_panel import OutputPanel
from storage import Client, JobState
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app


def detail(app: object) -> JobDetailScreen:
    screen = getattr(app, "screen", None)
    assert isinstance(screen, JobDetailScreen)
    return screen


async def test_compact_output_is_shown_exactly_typed_sized_and_checked(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        summary = text_of(screen.query_one("#summary"))
        assert "completed" in summary
        assert "compact" in summary
        assert "mail" in summary
        panel = text_of(screen.query_one(OutputPanel))
        exact = '{"message_id":"msg-000001","accepted":["user1@example.com"],"provider":"postmark"}'
        assert exact in panel
        assert "type EmailReceipt" in panel
        assert f"size {len(exact)} B of 4,096 B" in panel
        assert "✓ fits the schema" in panel


async def test_general_path_job_shows_tags_metadata_and_args(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.resized)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        summary = text_of(screen.query_one("#summary"))
        assert "general" in summary
        assert "upload" in summary
        assert '"uploaded_by": "ana"' in text_of(screen.query_one("#metadata"))
        assert '"image_id": 101' in text_of(screen.query_one("#args"))
        assert "Thumbnail" in text_of(screen.query_one(OutputPanel))


async def test_output_that_no_longer_fits_the_declared_schema(
    migrated_dsn: str, schema: str, incident: Incident, conn: asyncpg.Connection
) -> None:
    changed = {"type": "EmailReceipt", "schema": {"type": "object", "required": ["bounced"]}}
    await conn.execute(
        "UPDATE awa.job_kind_descriptors SET output = $1::jsonb WHERE kind = 'send_email'",
        orjson.dumps(changed).decode(),
    )
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[1])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = text_of(detail(app).query_one(OutputPanel))
        assert "✗ does not fit: $.bounced: is required but missing" in panel
        await pilot.press("s")
        await settle(pilot)
        assert '"bounced"' in text_of(app.screen.query_one("#schema-json"))


async def test_absent_outputs_say_why(migrated_dsn: str, schema: str, incident: Incident) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.waiting)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        assert "Waiting for a callback: an output recorded before" in text_of(
            screen.query_one(OutputPanel)
        )
        summary = text_of(screen.query_one("#summary"))
        assert "4f1c9a2e-5b7d-4c3a-9e1f-000000000007" in summary
        assert "times out 2026-03-14 10:25:00Z (in 55m)" in summary
        for job_id, expected in (
            (incident.untyped, "The handler recorded none (set_output)."),
            (
                incident.failed,
                "Not completed: a failed attempt's output is kept in error entry #2.",
            ),
            (incident.dead, "Dead-lettered (terminal_error), not completed"),
            (999, "No such job: never inserted in this schema, or pruned with its queue slot."),
        ):
            await pilot.press("escape")
            app.open_job(job_id)
            await settle(pilot)
            assert expected in text_of(detail(app).query_one(OutputPanel)), job_id
        assert "Job 999 does not exist." in text_of(detail(app).query_one("#summary"))


async def test_copy_and_save(
    migrated_dsn: str, schema: str, incident: Incident, tmp_path: Path
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.resized, save_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        row = detail(app).row
        assert row is not None
        assert row.output_text is not None
        await pilot.press("y")
        assert app.clipboard == row.output_text
        await pilot.press("ctrl+s")
        saved = orjson.loads((tmp_path / f"awa-job-{incident.resized}.json").read_bytes())
        assert saved["output_text"] == row.output_text
        assert saved["output"]["url"] == "https://cdn.example/t/101.webp"
        await pilot.press("escape")
        app.open_job(incident.waiting)
        await settle(pilot)
        await pilot.press("y")
        assert app.clipboard == str(incident.waiting)  # no output: the id


async def test_actions_are_disabled_with_the_reason(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        assert screen.check_action("retry", ()) is False  # a completed job: left out
        assert screen.check_action("delete", ()) is True
        assert screen.check_action("purge", ()) is False  # only shown for dead-lettered jobs
        reason = screen.binding_reason("retry")
        assert reason == "Job 1 is completed; only failed or cancelled jobs can be retried."
        assert screen.binding_reason("complete_callback") == (
            "Job 1 is completed, not waiting for a callback."
        )
        await pilot.press("R")
        await settle(pilot)
        assert app.screen is screen  # disabled: no confirmation appears


def footer_keys(screen: JobDetailScreen) -> list[str]:
    """What the footer offers (dimmed keys included)."""
    return [key.description for key in screen.query_one(Footer).query(FooterKey)]


async def test_the_footer_offers_only_the_writes_that_apply_and_a_hidden_key_says_why(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """A completed job's footer has Delete but no Complete, Retry or Cancel; C still answers,
    with the reason. A job waiting for its callback offers Complete and Cancel, not Delete."""
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[0])
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        screen = detail(app)
        footer = footer_keys(screen)
        assert "Delete" in footer
        for label in ("Complete", "Retry", "Cancel", "Purge"):
            assert label not in footer
        await pilot.press("C")
        await settle(pilot)
        assert app.screen is screen
        messages = [n.message for n in app._notifications]
        assert "Job 1 is completed, not waiting for a callback." in messages
        await pilot.press("escape")
        app.open_job(incident.waiting)
        await settle(pilot)
        footer = footer_keys(detail(app))
        assert "Complete" in footer
        assert "Cancel" in footer
        assert "Delete" not in footer


async def test_retry_a_failed_job(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.failed)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        confirm = app.screen
        assert isinstance(confirm, ConfirmModal)
        assert confirm.title_text == "Retry job 5?"
        await pilot.press("n")
        await settle(pilot)
        row = await client.get_job(incident.failed)
        assert row is not None
        assert row.state is JobState.FAILED
        await pilot.press("R")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        row = await client.get_job(incident.failed)
        assert row is not None
        assert row.state is JobState.AVAILABLE
        assert len(row.errors) == 3  # the history is kept
        screen = detail(app)
        assert screen.row is not None
        assert screen.row.state is JobState.AVAILABLE


async def test_cancel_and_delete(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.available)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("X")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        row = await client.get_job(incident.available)
        assert row is not None
        assert row.state is JobState.CANCELLED
        assert row.errors[-1]["error"] == "cancelled by operator"
        await pilot.press("D")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert await client.get_job(incident.available) is None
        assert "does not exist" in text_of(detail(app).query_one("#summary"))


async def test_dead_lettered_job_retry_and_purge(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.dead)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = detail(app)
        assert "DLQ reason" in text_of(screen.query_one("#summary"))
        assert screen.check_action("purge", ()) is True
        await pilot.press("R")
        await settle(pilot)
        confirm = app.screen
        assert isinstance(confirm, ConfirmModal)
        assert confirm.title_text.startswith("Retry from DLQ")
        await pilot.press("y")
        await settle(pilot)
        row = await client.get_job(incident.dead)
        assert row is not None
        assert row.dlq is None
        assert row.state is JobState.AVAILABLE


async def test_detail_follows_a_job_that_moves_on_under_live_refresh(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    """Opened while available, cancelled by someone else: the detail shows it cancelled
    without a key press, as the browser would."""
    app = build_app(migrated_dsn, schema, initial_job=incident.available, refresh=0.2)
    async with app.run_test(size=SIZE) as pilot:

        async def until_state(state: JobState) -> JobDetailScreen:
            for _ in range(300):  # a bounded wait on the real condition, not a sleep
                await pilot.pause(0.05)
                screen = app.screen
                row = screen.row if isinstance(screen, JobDetailScreen) else None
                if row is not None and row.state is state:
                    assert isinstance(screen, JobDetailScreen)
                    return screen
            raise AssertionError(f"the detail never showed {state}")

        detail = await until_state(JobState.AVAILABLE)
        await client.cancel_job(incident.available)
        assert await until_state(JobState.CANCELLED) is detail
        assert "cancelled" in text_of(detail.query_one("#summary"))
