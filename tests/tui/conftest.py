"""Console fixtures: jobs seeded through the real runtime, and a helper that waits for the app."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TextArea
from textual.worker import WorkerState

from storage import Client
from tui.scenarios import Incident, seed_incident


@pytest.fixture
async def incident(client: Client, conn: asyncpg.Connection) -> Incident:
    return await seed_incident(client, conn)


async def settle(pilot: Pilot[Any]) -> None:
    """Wait until no worker runs and no message is pending (workers start more workers)."""
    app = pilot.app
    for _ in range(50):
        await app.workers.wait_for_complete()
        await pilot.pause()
        busy = [w for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)]
        if not busy:
            await pilot.pause()
            if not [
                w for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            ]:
                return
    raise AssertionError("the app did not settle")


def freeze_cursors(pilot: Pilot[Any]) -> None:
    """No blinking cursors in snapshots."""
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    for area in pilot.app.screen.query(TextArea):
        area.cursor_blink = False
