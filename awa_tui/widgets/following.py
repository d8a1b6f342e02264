"""A detail panel that follows the selected row: it reads one bounded answer for it in a worker
when what it follows changes, shows only the answer for what it still follows, and says so when
the read failed (the next ``follow`` reads again). It keeps one answer, whatever the refreshes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar, Generic, TypeVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from awa_tui.resilience import Guarded
from storage import Client

Connect = Callable[[], Awaitable[Client]]
"""The screen's client (``AwaApp.client``)."""
KeyT = TypeVar("KeyT")
FoundT = TypeVar("FoundT")


def rows_grid(one_line: int) -> Table:
    """A grid of rows: ``one_line`` columns that never wrap, then one that takes the rest."""
    grid = Table.grid(padding=(0, 2))
    for _ in range(one_line):
        grid.add_column(no_wrap=True)
    grid.add_column()
    return grid


class FollowingPanel(Guarded, Vertical, Generic[KeyT, FoundT]):
    """Subclasses say what they read (``fetch``) and how it reads (``render_found``)."""

    DEFAULT_CSS = """
    FollowingPanel { height: auto; display: none; }
    FollowingPanel > Static { height: auto; }
    """
    READING: ClassVar[str] = "reading…"
    FAILED: ClassVar[str] = "Could not read this."

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.following: KeyT | None = None
        self.found: FoundT | None = None

    def compose(self) -> ComposeResult:
        yield Static()

    async def fetch(self, client: Client, key: KeyT) -> FoundT:
        raise NotImplementedError

    def render_found(self, found: FoundT) -> RenderableType:
        raise NotImplementedError

    def follow_key(self, client: Connect, key: KeyT, *, keep: bool = False) -> None:
        """Show the answer for ``key``, read now unless it is the one shown; ``keep``: the last
        answer stays on screen while the new one is read (the same row, grown)."""
        self.display = True
        if self.following == key:
            return
        self.following = key
        if not keep:
            self.found = None
            self.query_one(Static).update(Text(self.READING, style="dim"))
        self._read(client, key)

    def forget(self) -> None:
        """The next ``follow`` reads again (a refresh)."""
        self.following = None

    def hide(self) -> None:
        self.display = False
        self.following = None
        self.found = None

    @work(exclusive=True, exit_on_error=False, group="follow")
    async def _read(self, client: Connect, key: KeyT) -> None:
        found = await self.fetch(await client(), key)
        if self.following != key:
            return  # the panel moved on meanwhile
        self.found = found
        self.query_one(Static).update(self.render_found(found))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)
        if event.worker.group == "follow" and event.state is WorkerState.ERROR:
            self.following = None  # the next follow reads again
            self.query_one(Static).update(Text(self.FAILED, style="yellow"))
