"""Pointed at a database the real Awa made (one failed job in it), the console, ``serve``,
``worker`` and ``migrate`` each refuse to start with the same one line and exit 8, no
traceback; the console never opens on it (so it never says "No failed jobs")."""

from __future__ import annotations

import pytest

from awa_tui.errors import EXIT_FOREIGN
from tests.awa_made import AWA_SCHEMA_VERSION
from tests.tui.scenarios import build_app
from tests.tui.test_cli import assert_one_clean_line, run_cli

LINE = (
    f"awa-tui: this database was made by Awa (schema version {AWA_SCHEMA_VERSION}), not by "
    "awa-tui; awa-tui reads only databases it migrated"
)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["--read-only"],
        ["migrate"],
        ["serve", "--no-auth", "--port", "0"],
        ["worker", "tests.workers_tasks:tasks"],
        ["worker", "tests.workers_tasks:tasks", "--processes", "2"],
    ],
    ids=["console", "console-read-only", "migrate", "serve", "worker", "worker-processes"],
)
def test_every_command_refuses_an_awa_database_in_one_line(
    awa_made_dsn: str, command: list[str]
) -> None:
    if command[:1] in (["serve"], ["worker"]):
        result = run_cli(command[0], *command[1:], "--dsn", awa_made_dsn)
    else:
        result = run_cli("--dsn", awa_made_dsn, *command)
    assert result.returncode == EXIT_FOREIGN, result.stderr
    assert assert_one_clean_line(result) == LINE
    assert "serving" not in result.stdout


async def test_the_console_exits_before_showing_any_tab(awa_made_dsn: str) -> None:
    app = build_app(awa_made_dsn, "awa")
    async with app.run_test() as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert app.return_code == EXIT_FOREIGN
    assert app.fatal_message == LINE.removeprefix("awa-tui: ")
