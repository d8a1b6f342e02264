"""Several schemas in one console: ``Z`` lists them with their counts and shows another; the
header always names the schema shown (issue #26 item 6)."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from awa_tui.app import AwaApp, make_app
from awa_tui.cli import schemas_named
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.schema_picker import SchemaPickerModal
from storage import Client, ConfigError, Job
from storage.db.migrator import install_schema
from storage.db.pool import connect_once
from tests.tui.conftest import text_of, until
from tests.tui.live import arrive


async def _noop(job: Job[dict[str, int]]) -> None:
    return None


async def _one_job(dsn: str, schema: str, kind: str) -> None:
    async with await Client.connect(dsn, schema) as client:
        client.task(kind=kind, queue="picked")(_noop)
        await client.insert({"n": 1}, kind=kind)


def _kinds_shown(app: AwaApp) -> set[str]:
    screen = app.screen
    return {job.kind for job in screen.table.jobs} if isinstance(screen, JobsScreen) else set()


async def test_z_lists_the_named_schemas_and_shows_the_chosen_one(
    migrated_dsn: str, schema: str
) -> None:
    other = f"{schema}_b"
    async with connect_once(migrated_dsn) as conn:
        await install_schema(conn, other)
    await _one_job(migrated_dsn, schema, "here.kind")
    await _one_job(migrated_dsn, other, "there.kind")
    app = make_app(migrated_dsn, schema, schemas=(schema, other, "never_installed"), refresh=0)
    async with app.run_test(size=(120, 36)) as pilot:
        await arrive(pilot, JobsScreen)
        assert await until(pilot, lambda: "here.kind" in _kinds_shown(app))
        assert f"schema {schema}" in app.sub_title

        await pilot.press("Z")
        await arrive(pilot, SchemaPickerModal)
        options = app.screen.query_one("#schemas", OptionList)
        assert await until(pilot, lambda: options.option_count == 2)
        lines = [str(options.get_option_at_index(i).prompt) for i in range(2)]
        assert lines[0].startswith(schema)
        assert "(shown now)" in lines[0]
        assert lines[1].startswith(other)
        assert "1 job · 0 failed · 0 in the DLQ" in lines[1]
        assert "2 installed schemas of the 3 schemas named by --schema" in text_of(
            app.screen.query_one("#schemas-note")
        )

        await pilot.press("down", "enter")
        assert await until(pilot, lambda: "there.kind" in _kinds_shown(app))
        assert "here.kind" not in _kinds_shown(app)
        assert f"schema {other}" in app.sub_title
        assert app.schema == other

        await pilot.press("Z")
        await arrive(pilot, SchemaPickerModal)
        await pilot.press("escape")
        await arrive(pilot, JobsScreen)
        assert app.schema == other


@pytest.mark.parametrize(
    ("text", "shown", "offered"),
    [("awa", "awa", ()), ("b, a ,b", "b", ("b", "a")), ("*", "awa", ())],
)
def test_schema_option(text: str, shown: str, offered: tuple[str, ...]) -> None:
    assert schemas_named(text) == (shown, offered)


@pytest.mark.parametrize("text", [",", "a,Bad-Name!"])
def test_schema_option_refuses_what_is_no_schema(text: str) -> None:
    with pytest.raises(ConfigError):
        schemas_named(text)
