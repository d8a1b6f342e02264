"""The snapshot helper that stops cursors blinking draws the same picture whatever the phase."""

from __future__ import annotations

import re

from textual.app import App, ComposeResult
from textual.widgets import TextArea

from tests.tui.conftest import freeze_cursors, until


class OneArea(App[None]):
    def compose(self) -> ComposeResult:
        yield TextArea("hello")


def picture(app: App[None]) -> str:
    return re.sub(r"terminal-\d+", "terminal", app.export_screenshot())


async def steady_picture() -> str:
    app = OneArea()
    async with app.run_test() as pilot:
        area = app.query_one(TextArea)
        area.cursor_blink = False
        area.focus()
        await pilot.pause()
        return picture(app)


async def test_a_text_area_frozen_in_its_hidden_blink_phase_still_shows_its_cursor() -> None:
    app = OneArea()
    async with app.run_test() as pilot:
        area = app.query_one(TextArea)
        area.focus()
        assert await until(pilot, lambda: not area._cursor_visible), "the blink never hid"
        await pilot.pause()  # the hidden phase's lines are drawn, and cached
        freeze_cursors(pilot)
        await pilot.pause()
        frozen = picture(app)
    assert frozen == await steady_picture()
