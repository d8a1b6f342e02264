"""Queues: one row per queue with its pause state, depth per live state, lag and throughput.

The first questions of an incident: which queue is backing up, is it still moving, and can I
stop it while I look. The rows are sorted by lag, largest first (``s`` cycles to depth and to
failures). ``p`` pauses or resumes the selected queue (confirmed; refused with the
reason in read-only mode). The rows refresh live like the browser's, and stay on screen marked
stale while the connection is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Sparkline, Static

from awa_tui.messages import QueuesLoaded
from awa_tui.query import JobQuery
from awa_tui.screens.base import Jump
from awa_tui.screens.confirm import Confirmed, ConfirmModal
from awa_tui.screens.table import HeadPart, TableScreen
from awa_tui.timefmt import both
from storage import Client, JobState, QueueSummary

DEPTH = (
    ("avail", JobState.AVAILABLE),
    ("run", JobState.RUNNING),
    ("wait", JobState.WAITING_EXTERNAL),
    ("sched", JobState.SCHEDULED),
    ("retry", JobState.RETRYABLE),
)
BLOCKS = " ▁▂▃▄▅▆▇█"
SPARK_WIDTH = 30
"""Characters of the table's sparkline: two minutes each over the hour."""


def sparkline_text(values: list[int], width: int = SPARK_WIDTH) -> Text:
    """Per-minute counts as block characters, ``width`` buckets, oldest left; blank when idle."""
    size = max(1, len(values) // width)
    buckets = [sum(values[i : i + size]) for i in range(0, len(values), size)][-width:]
    top = max(buckets, default=0)
    if top == 0:
        return Text("·" * len(buckets), style="dim")
    chars = [BLOCKS[0 if v == 0 else max(1, round(v / top * (len(BLOCKS) - 1)))] for v in buckets]
    return Text("".join(chars), style="green")


NEVER = datetime.max.replace(tzinfo=UTC)


def _by_lag(q: QueueSummary) -> tuple[datetime, str]:
    """The oldest available job first (the largest lag); queues with none available last."""
    return (q.oldest_available_at or NEVER, q.queue)


SORTS: tuple[tuple[str, Callable[[QueueSummary], tuple[object, ...]]], ...] = (
    ("lag", _by_lag),
    ("depth", lambda q: (-q.counts.get(JobState.AVAILABLE, 0), q.queue)),
    ("failures", lambda q: (-q.failed_1h, q.queue)),
)
"""The Queues screen's orders, ``s`` cycling through them: each largest first, ties by name.
Lag first: it answers "which queue is backing up". Depth is the available jobs."""


def sorted_queues(queues: Sequence[QueueSummary], sort: str) -> list[QueueSummary]:
    return sorted(queues, key=dict(SORTS)[sort])


def lag_text(lag: timedelta | None) -> Text:
    if lag is None:
        return Text("-", style="dim", justify="right")
    seconds = lag.total_seconds()
    if seconds < 120:
        shown = f"{seconds:.0f}s"
    else:
        shown = f"{seconds / 60:.0f}m" if seconds < 7200 else f"{seconds / 3600:.0f}h"
    style = "bold red" if seconds >= 300 else "yellow" if seconds >= 30 else ""
    return Text(shown, style=style, justify="right")


class QueuesScreen(TableScreen[QueueSummary]):
    """Enter shows the queue's jobs; ``p`` pauses or resumes it."""

    TITLE = "Queues"
    HELP = (
        "Which queue is backing up: per queue its lag (age of the oldest available job), "
        "failures in the last hour, depth by state and completions, largest lag first; s sorts "
        "by depth (available jobs), then failures, then lag again. Enter opens the browser on "
        "the queue's jobs (esc comes back to this row); p pauses or resumes it."
    )
    JUMP = Jump("Q", "queues", "Queues")
    READ_GROUP = "queues"
    COLUMNS = (
        ("queue", "queue", 12),
        ("state", "state", 6),
        ("lag", "lag", 4),  # lag and failures first: what on-call reads first
        ("f1h", "failed 1h", 9),
        *[(label, label, max(len(label), 4)) for label, _state in DEPTH],
        ("c5", "done 5m", 7),
        ("c1h", "done 1h", 7),
        ("spark", "completions/min, last hour", SPARK_WIDTH),
    )
    SHRINK = (("spark", 15), ("c1h", None), ("spark", None), ("c5", None), ("sched", None))
    """Narrow: the sparkline halves, then the hour's and 5 minutes' completions and the
    scheduled count leave; the queue, its lag, failures and what waits to run stay."""
    ENTER = "jobs"
    WRITE_ACTIONS = frozenset({"toggle_pause"})
    DEFAULT_CSS = """
    #queue-spark { height: 4; margin: 1 0 0 0; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="queues.back"),
        Binding("enter", "jobs", "Jobs of queue", id="queues.jobs"),
        Binding("p", "toggle_pause", "Pause/resume", id="queues.pause"),
        Binding("s", "sort", "Sort", id="queues.sort"),
        Binding("r", "refresh", "Refresh", id="queues.refresh"),
        Binding("j", "down", "Down", show=False, id="queues.down"),
        Binding("k", "up", "Up", show=False, id="queues.up"),
    ]

    sort = SORTS[0][0]
    """The order of the rows, a name in ``SORTS``."""

    def compose_detail(self) -> ComposeResult:
        yield Static(Text("loading…", style="dim"), id="queue-summary")
        spark = Sparkline([0], id="queue-spark")
        spark.display = False  # one value draws a solid block; shown with a queue's history
        yield spark

    async def fetch(self, client: Client) -> QueuesLoaded:
        return QueuesLoaded(await client.list_queues())

    def on_queues_loaded(self, message: QueuesLoaded) -> None:
        self.show_rows(sorted_queues(message.queues, self.sort))

    def action_sort(self) -> None:
        """The next order of ``SORTS``, on the rows shown (no new read); the cursor stays on
        its queue."""
        names = [name for name, _key in SORTS]
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        if self.loaded:
            self.show_rows(sorted_queues(self.rows, self.sort))
        else:
            self.show_head()

    def row_key(self, row: QueueSummary) -> str:
        return row.queue

    def cells(self, row: QueueSummary, now: datetime) -> Sequence[RenderableType]:
        return (
            Text(row.queue, style="bold"),
            Text("paused", style="bold yellow") if row.paused else Text("active", style="green"),
            lag_text(_age(row.oldest_available_at, now)),
            _count(row.failed_1h, exact=row.hour_exact, style="red"),
            *[_depth(row, state) for _label, state in DEPTH],
            _count(row.completed_5m),
            _count(row.completed_1h, exact=row.hour_exact),
            sparkline_text(row.completions_per_minute, self.width_of("spark") or SPARK_WIDTH),
        )

    def headline(self) -> list[HeadPart]:
        paused = sum(q.paused for q in self.rows)
        parts: list[HeadPart] = [f" · {len(self.rows)} known · by {self.sort} ▼ (s)"]
        if paused:
            parts.append((f" · {paused} paused", "bold yellow"))
        return parts

    def show_current(self) -> None:
        q = self.current
        box = self.query_one("#queue-summary", Static)
        spark = self.query_one("#queue-spark", Sparkline)
        if q is None:
            empty = "No queues yet: nothing was inserted or configured." if self.loaded else ""
            box.update(Text(empty, style="dim"))
            spark.display = False
            return
        now = self.awa.now()
        pause = (
            Text.assemble(("Paused", "bold yellow"), f" since {both(q.paused_at, now)}")
            if q.paused
            else Text("Active: runtimes claim its jobs.", style="green")
        )
        bound = "" if q.hour_exact else f" (at least: exact since {both(q.exact_since, now)})"
        lines = [
            Text.assemble(("Queue ", "bold"), (q.queue, "bold")),
            pause,
            Text.assemble(
                ("Last 5 min: ", "bold"), f"{q.completed_5m:,} completed, {q.failed_5m:,} failed"
            ),
            Text.assemble(
                ("Last hour: ", "bold"),
                f"{q.completed_1h:,} completed, {q.failed_1h:,} failed{bound}",
            ),
            Text("Completions per minute over the last hour (oldest left):", style="dim"),
        ]
        box.update(Group(*lines))
        spark.data = list(q.completions_per_minute)
        spark.display = True

    def binding_reason(self, action: str) -> str | None:
        if action in ("toggle_pause", "jobs") and self.current is None:
            return "No queue is selected."
        return None

    def action_jobs(self) -> None:
        if self.current is not None:
            self.awa.drill(JobQuery(queue=self.current.queue), self)

    def action_toggle_pause(self) -> None:
        q = self.current
        if q is None or self.awa.refuse_write():
            return
        verb, pausing = ("Resume", False) if q.paused else ("Pause", True)
        body = (
            "Every runtime on this schema stops claiming its jobs at its next poll. "
            "Running jobs finish; new jobs are still accepted and wait."
            if pausing
            else "Runtimes start claiming its "
            f"{q.counts[JobState.AVAILABLE]:,} available jobs again at their next poll."
        )

        def done(confirmed: Confirmed | None) -> None:
            if confirmed:
                self.set_paused(q.queue, pausing, confirmed.reason)

        self.app.push_screen(
            ConfirmModal(
                f"{verb} queue {q.queue}?",
                body,
                confirm_label=f"{verb} {q.queue}",
                keep_label="Leave it as it is",
                danger=pausing,
            ),
            done,
        )

    @work(exclusive=True, exit_on_error=False, group="write")
    async def set_paused(self, queue: str, paused: bool, reason: str | None = None) -> None:
        client = await self.awa.client()
        try:
            if paused:
                await client.pause_queue(queue, actor=self.awa.actor, reason=reason)
            else:
                await client.resume_queue(queue, actor=self.awa.actor, reason=reason)
            self.awa.notify(f"Queue {queue} {'paused' if paused else 'resumed'}.", title="Queues")
        finally:
            self.reload()


def _age(moment: datetime | None, now: datetime) -> timedelta | None:
    """The lag by the console's clock (as every time it shows), never negative."""
    return None if moment is None else max(now - moment, timedelta(0))


def _depth(q: QueueSummary, state: JobState) -> Text:
    n = q.counts.get(state, 0)
    capped = "+" if state in q.capped else ""
    return _count(n, suffix=capped)


def _count(value: int, *, exact: bool = True, style: str = "", suffix: str = "") -> Text:
    if not value:
        return Text("·", justify="right", style="dim")
    shown = ("≥" if not exact else "") + f"{value:,}{suffix}"
    return Text(shown, justify="right", style=style)
