"""What every screen of the console shares: the app typed, the banner, help reasons."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.screen import Screen

from awa_tui.messages import ClientConnected
from awa_tui.resilience import Guarded
from awa_tui.widgets.mode_banner import ModeBanner

if TYPE_CHECKING:
    from awa_tui.app import AwaApp
    from awa_tui.resilience import ConnectionState


class AwaScreen(Guarded, Screen[None]):
    """A full screen of the console. Subclasses compose a ``ModeBanner`` under the header.

    Its handlers are guarded: an unexpected exception is a notification, not a dead screen.
    """

    @property
    def awa(self) -> AwaApp:
        return cast("AwaApp", self.app)

    def on_mount(self) -> None:
        self.watch(self.app, "read_only_reason", self._show_modes, init=True)
        self.watch(self.app, "connection", self._connection_changed, init=False)

    def _show_modes(self, _reason: object = None) -> None:
        for banner in self.query(ModeBanner):
            banner.show_modes(
                self.awa.settings.demo_label,
                self.awa.read_only_reason,
                self.awa.connection.banner(),
            )
        self.refresh_bindings()

    def _connection_changed(self, old: ConnectionState, new: ConnectionState) -> None:
        if old.lost != new.lost:
            self._show_modes()
            self.stale_changed(new.lost)

    def stale_changed(self, stale: bool) -> None:
        """The connection was lost (what is shown is stale) or is back; screens mark it."""
        del stale

    def on_client_connected(self, message: ClientConnected) -> None:
        self._show_modes()

    def binding_reason(self, action: str) -> str | None:
        """Why ``action`` is unavailable right now (shown in help); None when it is available."""
        del action
        return None
