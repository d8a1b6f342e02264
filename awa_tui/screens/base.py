"""What every screen of the console shares: the app typed, the banner, why a key does not apply.

``binding_reason`` is the one place a screen decides whether an action applies and, if not,
why. ``check_action`` derives the footer state from it (dimmed, or hidden for writes in
read-only mode), and the app (``AwaApp.run_action``) turns a refused key press into a
notification with the same reason, so no key ever does nothing silently. A key typed before
a screen has loaded what it acts on may wait for it instead (``typed_ahead``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen

from awa_tui.messages import ClientConnected
from awa_tui.resilience import Guarded
from awa_tui.widgets.mode_banner import ModeBanner

if TYPE_CHECKING:
    from awa_tui.app import AwaApp
    from awa_tui.resilience import ConnectionState


@dataclass(frozen=True)
class Jump:
    """The key that opens a screen from any other (the app binds it, ``AwaApp.action_jump``)."""

    key: str
    action: str
    """The name of the jump: ``jump('ACTION')`` is the binding's action."""
    description: str
    show: bool = True

    def binding(self) -> Binding:
        return Binding(
            self.key,
            f"jump('{self.action}')",
            self.description,
            show=self.show,
            id=f"app.{self.action}",
        )


class AwaScreen(Guarded, Screen[None]):
    """A full screen of the console. Subclasses compose a ``ModeBanner`` under the header.

    Its handlers are guarded: an unexpected exception is a notification, not a dead screen.
    """

    TITLE: ClassVar[str]
    """What the screen is called: in help, in the palette, and above its table."""
    HELP: ClassVar[str] = ""
    """What the screen does and what its keys do not say by themselves (help shows it)."""
    READ_GROUP: ClassVar[str | None] = None
    """The worker group of the screen's reads: their success means the database answered
    (the app counts them for the connection state)."""
    JUMP: ClassVar[Jump | None] = None
    """The key that opens this screen from anywhere, for the screens the app lists in
    ``JUMPS``."""
    WRITE_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    """Actions that write; hidden from the footer when writes are impossible."""

    _bindings_shown: tuple[object, ...] | None = None
    """What the footer last showed (``refresh_bindings``)."""

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

    def refresh_bindings(self) -> None:
        """Tell the footer only when what it shows changed.

        Screens call this after every live refresh, and each call rebuilds the footer's keys:
        at ``--refresh 0.2`` that was dozens of widgets a second, for a footer that did not
        change. What the footer shows is each active binding, whether it is enabled, and its
        tooltip; an unfocused app's footer ignores the call, so nothing is remembered then. A
        screen being built or taken down (its widgets not all there) always tells.
        """
        shown = None
        if self.is_current and self.app.app_focus:
            try:
                shown = tuple(
                    (key, active.binding, active.enabled, active.tooltip)
                    for key, active in self.active_bindings.items()
                )
            except NoMatches:
                shown = None
            if shown is not None and shown == self._bindings_shown:
                return
        self._bindings_shown = shown
        super().refresh_bindings()

    def stale_changed(self, stale: bool) -> None:
        """The connection was lost (what is shown is stale) or is back; screens mark it."""
        del stale

    def on_client_connected(self, message: ClientConnected) -> None:
        self._show_modes()

    def refusal(self, action: str) -> str | None:
        """Why ``action`` does not apply right now; None when it does. Shown in help, and in a
        notification when its key is pressed anyway. A write while writes are off is answered
        here, once for every screen (``WRITE_ACTIONS``); the rest is the screen's own
        ``binding_reason``."""
        if action in self.WRITE_ACTIONS and not self.awa.writable:
            return self.awa.read_only_reason
        return self.binding_reason(action)

    def binding_reason(self, action: str) -> str | None:
        """The screen's own reason ``action`` does not apply (``refusal`` asks it)."""
        del action
        return None

    def typed_ahead(self, action: str) -> bool:
        """Whether ``action``, refused because what it acts on has not loaded yet (a key typed
        right after the one that opened the screen or switched its page), is kept for the
        screen to run once it has: then True, and it says nothing now."""
        del action
        return False

    def hides(self, action: str) -> bool:
        """Whether a refused ``action`` is left out of the footer rather than dimmed."""
        return action in self.WRITE_ACTIONS and not self.awa.writable

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.refusal(action) is None:
            return True
        return False if self.hides(action) else None
