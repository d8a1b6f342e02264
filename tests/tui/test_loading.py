"""Loading says "loading": never "0 known", a solid block, or "No jobs" while a read is out.

A client whose reads wait on a gate stands in for a slow database (the database cannot be made
slow on demand); everything else is the real engine.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Sparkline

from awa_tui.app import make_app
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.queues import QueuesScreen
from storage import Client, JobPage
from tests.tui.conftest import settle, text_of, until
from tests.tui.scenarios import DSN_LABEL, SIZE, Incident, fixed_clock


class GatedClient(Client):
    gate: asyncio.Event

    async def browse(self, *args: Any, **kwargs: Any) -> JobPage:
        await self.gate.wait()
        return await super().browse(*args, **kwargs)


async def test_queues_say_loading_until_the_first_read(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    connected = asyncio.Event()

    async def connect() -> Client:
        await connected.wait()
        return await Client.connect(migrated_dsn, schema)

    app = make_app(
        migrated_dsn,
        schema,
        refresh=0,
        clock=fixed_clock,
        dsn_label=DSN_LABEL,
        client_factory=connect,
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("Q")
        assert await until(pilot, lambda: isinstance(app.screen, QueuesScreen))
        screen = app.screen
        head = text_of(screen.query_one("#queues-head"))
        assert "loading…" in head
        assert "known" not in head
        assert not screen.query_one(Sparkline).display  # no solid block
        browser = app.screen_stack[1]
        assert isinstance(browser, JobsScreen)
        status = text_of(browser.query_one("#status"))
        assert "No " not in status
        connected.set()
        assert await until(pilot, lambda: "known" in text_of(screen.query_one("#queues-head")))
        assert "loading" not in text_of(screen.query_one("#queues-head"))


async def test_the_browser_says_loading_while_a_sort_loads(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    gate = asyncio.Event()
    gate.set()

    async def connect() -> Client:
        client = await GatedClient.connect(migrated_dsn, schema)
        client.gate = gate
        return client

    app = make_app(
        migrated_dsn,
        schema,
        refresh=0,
        clock=fixed_clock,
        dsn_label=DSN_LABEL,
        client_factory=connect,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)

        def status() -> str:
            return text_of(screen.query_one("#status"))

        assert " shown, " in status()
        gate.clear()
        await pilot.press("s")
        assert await until(pilot, lambda: "loading" in status())
        assert "No " not in status()
        gate.set()
        assert await until(pilot, lambda: " shown, " in status())
        assert "loading" not in status()
