"""Textual's ``Header``, safe to retitle while it is being torn down."""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.dom import NoScreen
from textual.events import Mount
from textual.widgets import Header
from textual.widgets._header import HeaderTitle

from awa_tui.resilience import Guarded


class AppHeader(Guarded, Header):
    """The header every screen shows. The console retitles it on every refresh (the connection
    state and the time of the last refresh); Textual's own watcher raises ``NoMatches`` when
    that lands while a screen is being removed, and an error there would end the console. This
    one skips the update instead: a header that is going away has nothing to show."""

    @property
    def screen_title(self) -> str:
        """The app's title (the console and the connection), not the screen's ``TITLE``: each
        screen heads its own body with that."""
        return self.app.title

    def _on_mount(self, event: Mount) -> None:
        # Replaces Header._on_mount (Widget's own does nothing for a header without scrollbars).
        event.prevent_default()

        async def set_title() -> None:
            try:
                self.query_one(HeaderTitle).update(self.format_title())
            except (NoMatches, NoScreen):
                return

        self.watch(self.app, "title", set_title)
        self.watch(self.app, "sub_title", set_title)
        self.watch(self.screen, "title", set_title)
        self.watch(self.screen, "sub_title", set_title)
