"""Console fixtures: jobs seeded through the real runtime, and a helper that waits for the app."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

import asyncpg
import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, TextArea
from textual.worker import WorkerCancelled, WorkerState

from awa_tui.screens.timeline import TimelineScreen
from storage import Client
from tests.tui.scenarios import Incident, seed_incident


@pytest.fixture
async def incident(client: Client, conn: asyncpg.Connection) -> Incident:
    return await seed_incident(client, conn)


async def until(pilot: Pilot[Any], check: Callable[[], bool], within: float = 15.0) -> bool:
    """Whether ``check`` holds within ``within`` seconds, polled between frames of the live app."""
    deadline = time.monotonic() + within
    while not check() and time.monotonic() < deadline:
        await pilot.pause(0.02)
    return check()


async def settle(pilot: Pilot[Any]) -> None:
    """Wait until no worker runs, no message is pending (workers start more workers) and the
    screen is painted."""
    app = pilot.app
    for _ in range(50):
        # A worker an exclusive one replaced (a refresh tick, then a key) ends cancelled: that is
        # done, not an error; the loop below sees whether its successor still runs.
        with contextlib.suppress(WorkerCancelled):
            await app.workers.wait_for_complete()
        await pilot.pause()
        busy = [w for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)]
        if not busy:
            await pilot.pause()
            if not [
                w for w in app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            ]:
                await painted(pilot)
                return
    raise AssertionError("the app did not settle")


async def painted(pilot: Pilot[Any]) -> None:
    """Wait until the screen has no layout, scroll or repaint pending. A screen pushed under a
    busy loop could otherwise be captured half drawn (its table, but no header or footer).
    Textual has no public flag for this; these are the ones its own idle handler checks."""
    app = pilot.app
    for _ in range(100):
        screen = app.screen
        pending = (
            app._batch_count
            or screen._layout_required
            or screen._scroll_required
            or screen._repaint_required
            or screen._dirty_widgets
        )
        if not pending:
            return
        await pilot.pause()
    raise AssertionError("the screen was never fully painted")


def freeze_cursors(pilot: Pilot[Any]) -> None:
    """No blinking cursors in snapshots: each is drawn steadily. A TextArea caches its lines
    under a key that reads the same for "blinking, hidden phase" and "not blinking", so one
    frozen in the hidden phase would keep its cursorless lines; its cache is cleared here (the
    public style-update hook does that), else the picture depends on the blink (seen in CI)."""
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    for area in pilot.app.screen.query(TextArea):
        area.cursor_blink = False
        area.notify_style_update()
        area.refresh()


def text_of(thing: object) -> str:
    """The plain text a widget (or a cell, or a renderable) shows, children included."""
    from rich.console import Console
    from textual.content import Content
    from textual.widget import Widget
    from textual.widgets import Static

    if isinstance(thing, Widget):
        parts = []
        if isinstance(thing, Static):
            parts.append(text_of(thing.content))
        parts.extend(text_of(child) for child in thing.children)
        return "\n".join(part for part in parts if part)
    if isinstance(thing, str):
        return thing
    if isinstance(thing, Content):
        return thing.plain
    plain = getattr(thing, "plain", None)
    if isinstance(plain, str):
        return plain
    console = Console(width=200, record=True, color_system=None)
    with console.capture() as capture:
        console.print(thing)
    return capture.get()


async def wait_for_screen(pilot: Pilot[Any], screen_type: type[Any]) -> Any:
    """For flows whose worker waits on a modal (``settle`` would wait for it forever)."""
    for _ in range(200):
        if isinstance(pilot.app.screen, screen_type):
            return pilot.app.screen
        await pilot.pause(0.02)
    raise AssertionError(f"{screen_type.__name__} never appeared")


T = TypeVar("T")


async def open_screen(pilot: Pilot[Any], key: str, screen_type: type[T]) -> T:
    """Let the app load, press ``key`` and let the screen it opens load: that screen."""
    await settle(pilot)
    await pilot.press(key)
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, screen_type), f"{key} opened {type(screen).__name__}"
    return screen


async def open_timeline(pilot: Pilot[Any]) -> tuple[TimelineScreen, list[dict[str, str]]]:
    """``t`` in the job detail: the timeline screen and its rows' text by column key."""
    screen = await open_screen(pilot, "t", TimelineScreen)
    table = screen.query_one(DataTable)
    keys = [str(key.value) for key in table.columns]
    rows = [
        dict(zip(keys, (text_of(c) for c in table.get_row_at(i)), strict=True))
        for i in range(table.row_count)
    ]
    return screen, rows
