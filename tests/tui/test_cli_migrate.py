"""``awa-tui migrate`` failures: one line on stderr and a documented exit code, no traceback."""

from __future__ import annotations

import asyncio
import os
import sys

from awa_tui.errors import EXIT_PERMISSION
from tests.storage.roles import unprivileged_dsn


async def test_migrate_without_privileges_prints_one_line_and_exits_5(migrated_dsn: str) -> None:
    async with unprivileged_dsn(migrated_dsn) as (dsn, password):
        env = {k: v for k, v in os.environ.items() if k not in ("AWA_DSN", "DATABASE_URL")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "awa_tui",
            "migrate",
            "--dsn",
            dsn,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
    stderr = err.decode()
    assert process.returncode == EXIT_PERMISSION, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("awa-tui: migrate was refused: permission denied")
    assert "Traceback" not in stderr
    assert password not in stderr + out.decode()
