"""Beside a failed attempt's kept output, the last good output of its kind: the most recent
completed output of the same kind and queue (``Client.last_good_output``, a bounded read), so
"is this failure's output normal for this kind?" is answered on one screen."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from awa_tui.resilience import Guarded
from awa_tui.timefmt import relative
from awa_tui.widgets.json_view import json_content
from storage import LAST_GOOD_BOUND, Client, LastGoodOutput

Connect = Callable[[], Awaitable[Client]]
"""The screen's client (``AwaApp.client``)."""


def last_good_text(
    found: LastGoodOutput | None, kind: str, queue: str | None, now: datetime
) -> Text:
    """The heading of the last good output: which job, when, by which path; or the bound."""
    where = f"{kind}" + (f" in queue {queue}" if queue else "")
    head = Text(f"Last good output of {where}", style="bold")
    if found is None:
        head.append(f"\nNone among {LAST_GOOD_BOUND}.", style="italic")
        return head
    head.append(
        f"  job {found.job_id}, completed {relative(found.finalized_at, now)}"
        f" ({found.storage_path} path)",
        style="dim",
    )
    return head


class LastGoodPanel(Guarded, Vertical):
    """Shows a failed job's kept output and the last good output of its kind, read when the
    job (or kind) it follows changes; hidden while there is nothing to compare."""

    DEFAULT_CSS = """
    LastGoodPanel { height: auto; display: none; }
    LastGoodPanel > Static { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.following: tuple[str, str | None] | None = None
        self.found: LastGoodOutput | None = None

    def compose(self) -> ComposeResult:
        yield Static(classes="kept-head")
        yield Static(classes="kept-body")
        yield Static(classes="good-head")
        yield Static(classes="good-body")

    def follow(
        self,
        client: Connect,
        kind: str,
        queue: str | None,
        now: datetime,
        *,
        kept: Any | None = None,
        kept_label: str | None = None,
    ) -> None:
        """Show the last good output of ``kind`` (in ``queue``), beside ``kept`` when given
        (the kept output and where it is, ``kept_label``). Read again only when the kind or
        queue changes."""
        self.display = True
        kept_head = self.query_one(".kept-head", Static)
        kept_body = self.query_one(".kept-body", Static)
        kept_head.display = kept_body.display = kept is not None
        if kept is not None:
            kept_head.update(Text(kept_label or "Kept by a failed attempt", style="bold"))
            kept_body.update(json_content(orjson.dumps(kept).decode()))
        if self.following == (kind, queue):
            return
        self.following = (kind, queue)
        self.query_one(".good-head", Static).update(
            Text(f"Last good output of {kind}: reading…", style="dim")
        )
        self.query_one(".good-body", Static).update("")
        self.run_worker(
            self._read(client, kind, queue, now),
            exclusive=True,
            group="last-good",
            exit_on_error=False,
        )

    def hide(self) -> None:
        self.display = False
        self.following = None

    async def _read(self, client: Connect, kind: str, queue: str | None, now: datetime) -> None:
        found = await (await client()).last_good_output(kind, queue)
        if self.following != (kind, queue):
            return  # the panel moved on to another kind meanwhile
        self.found = found
        self.query_one(".good-head", Static).update(last_good_text(found, kind, queue, now))
        body = self.query_one(".good-body", Static)
        body.display = found is not None
        if found is not None:
            body.update(json_content(found.output_text))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)
        if event.worker.group == "last-good" and event.state is WorkerState.ERROR:
            self.following = None  # the next follow reads again
            self.query_one(".good-head", Static).update(
                Text("Could not read the last good output of this kind.", style="yellow")
            )
