"""The timeline after a DLQ retry: both "attempt 1" rows show their own error (matched by
position, ``storage.error_positions``), in the table and in the note."""

from __future__ import annotations

from storage import Client
from tests.storage.read.test_timeline_positions import twice_dead
from tests.tui.conftest import open_timeline, settle, text_of
from tests.tui.scenarios import SIZE, build_app


async def test_each_attempt_1_after_a_dlq_retry_shows_its_own_error(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    job_id = await twice_dead(client)
    app = build_app(migrated_dsn, schema, initial_job=job_id)
    async with app.run_test(size=SIZE) as pilot:
        screen, rows = await open_timeline(pilot)
        assert [r["attempt"] for r in rows] == ["1", "1"]
        assert rows[0]["error"].startswith("RuntimeError: run 1")
        assert rows[1]["error"].startswith("RuntimeError: run 2")
        assert "run 1 failed" in text_of(screen.query_one("#tl-note"))
        await pilot.press("j")
        await settle(pilot)
        assert "run 2 failed" in text_of(screen.query_one("#tl-note"))
