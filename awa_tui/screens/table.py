"""What the table screens share: queues, failure groups, the DLQ, kinds and schedules.

Each is one ``DataTable`` of rows read from the engine, a head line above it and the selected
row's detail below. Here: the layout, one read at a time in a worker of the screen's group (the
app counts those as reads for the connection state), the refill that keeps the cursor on its
row, the selected row and its detail, the stale mark while the connection is lost, and the keys
every one has (``r``, ``j``/``k``, ``esc``). Each screen keeps what is its own: its columns, how
a row, the head and the detail read, its keys and actions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from rich.console import RenderableType
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker

from awa_tui.messages import JobsChanged
from awa_tui.screens.base import AwaScreen
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.mode_banner import ModeBanner
from awa_tui.widgets.widths import Column, WidthPolicy, width_of

if TYPE_CHECKING:
    from storage import Client

RowT = TypeVar("RowT")
HeadPart = str | tuple[str, str]
Fetch = Callable[["Client"], Awaitable[Message]]

STALE_MARK: HeadPart = (" · stale: the connection is lost", "bold red")
LOADING_MARK: HeadPart = (" · loading…", "dim")


class TableScreen(AwaScreen, Generic[RowT]):
    """A screen around one table of ``rows``; subclasses say what a row is and how it reads."""

    READ_GROUP: ClassVar[str]
    """Its reads' worker group, and the ids of its parts (``#GROUP-head``, ``-table``,
    ``-detail``); the stylesheet styles them by class (``table-head``, ``table-rows``,
    ``table-detail``), so a new table screen needs no stylesheet edit. ``TITLE`` heads it."""
    COLUMNS: ClassVar[Sequence[Column]]
    """Key, label and width of each column; no width: as wide as its cells."""
    SHRINK: ClassVar[tuple[tuple[str, int | None], ...]] = ()
    FLEXIBLE: ClassVar[tuple[str, ...]] = ()
    FLEXIBLE_MIN: ClassVar[int] = 24
    """How the table fits the terminal's width (``awa_tui.widgets.widths``): the steps that
    drop or narrow columns, in order, and the column given the room left (its cells cut to
    ``width_of`` it). Left out: every column always shown."""
    ENTER: ClassVar[str]
    """The action enter (or a click) on a row runs, as its key would."""
    LIVE: ClassVar[bool] = True
    """Reload at the app's refresh interval while on top, and after writes (so also when the
    connection is back). Kinds and schedules read when opened and on ``r`` only."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[RowT] = []
        self.loaded = False
        self.stale = False
        # Not ``loading``: that is Textual's own reactive, which swaps the screen for a spinner.
        self.fetching = False
        self.shown: tuple[Column, ...] = ()

    # -- what each screen says ----------------------------------------------------------------
    async def fetch(self, client: Client) -> Message:
        """Read the rows; the message that carries them back calls ``show_rows``."""
        raise NotImplementedError

    def row_key(self, row: RowT) -> str:
        raise NotImplementedError

    def cells(self, row: RowT, now: datetime) -> Sequence[RenderableType]:
        raise NotImplementedError

    def headline(self) -> list[HeadPart]:
        """The head line after the heading (counts); the stale mark follows it while the
        connection is lost."""
        raise NotImplementedError

    def compose_detail(self) -> ComposeResult:
        """The widgets under the table that ``show_current`` fills (in one scrolling box)."""
        raise NotImplementedError

    def show_current(self) -> None:
        """Show the selected row's detail (or why there is none)."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        group = self.READ_GROUP
        yield Static(Text(self.TITLE, style="bold"), id=f"{group}-head", classes="table-head")
        yield DataTable(id=f"{group}-table", classes="table-rows", cursor_type="row")
        with VerticalScroll(id=f"{group}-detail", classes="table-detail"):
            yield from self.compose_detail()
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        # Subclasses define no on_mount: Textual calls the handler of every class along the MRO,
        # so theirs calling super() would run this one twice (two reads, two refresh timers).
        super().on_mount()
        table = self.query_one(DataTable)
        self._fit(self.app.size.width)
        table.focus()
        self.show_head()
        self.reload()
        if self.LIVE and (refresh := self.awa.settings.refresh) > 0:
            self.set_interval(refresh, self._tick)

    def on_resize(self, event: events.Resize) -> None:
        if self._fit(event.size.width) and self.loaded:
            self.show_rows(self.rows)

    def _fit(self, width: int) -> bool:
        """Set the columns for ``width`` cells; whether they changed."""
        policy = WidthPolicy(
            tuple(self.COLUMNS), self.SHRINK, self.FLEXIBLE, flexible_min=self.FLEXIBLE_MIN
        )
        shown = policy.fit(width)
        if shown == self.shown:
            return False
        self.shown = shown
        table = self.query_one(DataTable)
        table.clear(columns=True)
        for key, label, column_width in shown:
            table.add_column(label, key=key, width=column_width)
        return True

    def width_of(self, key: str) -> int | None:
        """The width column ``key`` is shown at; None when it is not shown or sized by its
        cells."""
        return width_of(self.shown, key)

    def _tick(self) -> None:
        if self.is_current and not self.fetching:
            self.reload()

    def reload(self) -> None:
        """Read the rows again; a read in flight is replaced."""
        self.read(self.fetch)

    def read(self, fetch: Fetch) -> Worker[None]:
        """Run ``fetch`` as this screen's one read (``@work`` cannot name a group per class)."""
        return self.run_worker(
            partial(self._read, fetch),
            name="load",
            group=self.READ_GROUP,
            exclusive=True,
            exit_on_error=False,
        )

    async def _read(self, fetch: Fetch) -> None:
        client = await self.awa.client()
        self.fetching = True
        try:
            self.post_message(await fetch(client))
        finally:
            self.fetching = False

    def show_rows(self, rows: list[RowT]) -> None:
        """Refill the table with ``rows``, the cursor on the row it was on while that is there."""
        keep = self.current
        self.rows = rows
        self.loaded = True
        self.stale = False
        table = self.query_one(DataTable)
        table.clear()
        now = self.awa.now()
        keys = [key for key, _l, _w in self.COLUMNS]
        shown = [key for key, _l, _w in self.shown]
        for row in rows:
            cells = dict(zip(keys, self.cells(row, now), strict=True))
            table.add_row(*[cells[key] for key in shown], key=self.row_key(row))
        if keep is not None and (key := self.row_key(keep)) in table.rows:
            table.move_cursor(row=table.get_row_index(key), animate=False)
        self.show_head()
        self.show_current()
        self.refresh_bindings()

    def show_head(self) -> None:
        """The heading and counts; until the first read answered, "loading…" (never a 0)."""
        stale = [STALE_MARK] if self.stale else []
        counts = self.headline() if self.loaded else [LOADING_MARK]
        self.query_one(f"#{self.READ_GROUP}-head", Static).update(
            Text.assemble((self.TITLE, "bold"), *counts, *stale)
        )

    @property
    def current(self) -> RowT | None:
        """The row under the cursor; None when there is none (or no table yet)."""
        if not self.is_mounted:
            return None
        row = self.query_one(DataTable).cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_current()
        self.refresh_bindings()

    @on(DataTable.RowSelected)
    async def _selected(self, event: DataTable.RowSelected) -> None:
        await self.run_action(self.ENTER)

    def stale_changed(self, stale: bool) -> None:
        """The rows stay while the connection is lost; the head line says they are stale."""
        self.stale = stale
        self.show_head()

    def on_jobs_changed(self, message: JobsChanged) -> None:
        if self.LIVE:
            self.reload()

    def action_back(self) -> None:
        self.dismiss()

    def action_refresh(self) -> None:
        self.reload()

    def action_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()
