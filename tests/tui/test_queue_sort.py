"""Q sorts by lag (the default: "which queue is backing up"), then depth, then failures, each
largest first, ``s`` cycling through them; the head line says which, and the cursor stays on
its queue across a change of order."""

from __future__ import annotations

from pydantic import BaseModel
from textual.widgets import DataTable

from awa_tui.screens.queues import QueuesScreen
from storage import Client, Job, TerminalError
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, build_app, work


class Ping(BaseModel):
    n: int


async def seed_three_queues(client: Client) -> None:
    """``lagging`` holds the oldest available job, ``deep`` the most available jobs, and
    ``failing`` the only failures of the hour (and nothing available)."""

    @client.task(Ping, queue="failing")
    async def ping(job: Job[Ping]) -> None:
        raise TerminalError("refused")

    await client.insert(Ping(n=0), queue="lagging")
    await client.insert_many([Ping(n=n) for n in range(5)], queue="deep")
    await client.insert_many([Ping(n=n) for n in range(2)], queue="failing", max_attempts=1)
    for _ in range(2):
        await work(client, "failing")


async def test_s_cycles_the_queues_through_lag_depth_and_failures(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    await seed_three_queues(client)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("Q")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        table = screen.query_one(DataTable)

        def order() -> list[str]:
            return [text_of(table.get_row_at(i)[0]) for i in range(table.row_count)]

        def head() -> str:
            return text_of(screen.query_one("#queues-head"))

        assert order() == ["lagging", "deep", "failing"]
        assert "by lag" in head()
        await pilot.press("s")
        await settle(pilot)
        assert order() == ["deep", "lagging", "failing"]
        assert "by depth" in head()
        assert screen.current is not None
        assert screen.current.queue == "lagging"  # the cursor stayed on its queue
        await pilot.press("s")
        await settle(pilot)
        assert order() == ["failing", "deep", "lagging"]
        assert "by failures" in head()
        await pilot.press("s")
        await settle(pilot)
        assert order() == ["lagging", "deep", "failing"]
        assert "by lag" in head()
        await pilot.press("r")  # a new read keeps the order chosen
        await settle(pilot)
        assert order() == ["lagging", "deep", "failing"]
