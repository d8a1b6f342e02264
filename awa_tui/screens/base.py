"""What every screen of the console shares: the app typed, the banner, help reasons."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.screen import Screen

from awa_tui.messages import ClientConnected
from awa_tui.widgets.mode_banner import ModeBanner

if TYPE_CHECKING:
    from awa_tui.app import AwaApp


class AwaScreen(Screen[None]):
    """A full screen of the console. Subclasses compose a ``ModeBanner`` under the header."""

    @property
    def awa(self) -> AwaApp:
        return cast("AwaApp", self.app)

    def on_mount(self) -> None:
        self.watch(self.app, "read_only_reason", self._show_modes, init=True)

    def _show_modes(self, _reason: str | None = None) -> None:
        for banner in self.query(ModeBanner):
            banner.show_modes(self.awa.settings.demo_label, self.awa.read_only_reason)
        self.refresh_bindings()

    def on_client_connected(self, message: ClientConnected) -> None:
        self._show_modes()

    def binding_reason(self, action: str) -> str | None:
        """Why ``action`` is unavailable right now (shown in help); None when it is available."""
        del action
        return None
