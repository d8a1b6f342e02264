"""The detail screen's summary grid: state, attempts, times, lease, queue, tags, callback, DLQ."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from awa_tui.present import heartbeat_note, state_text
from awa_tui.timefmt import both
from storage import JobKindDescriptor, JobRow, JobState


def summary_table(
    row: JobRow, descriptor: JobKindDescriptor | None, now: datetime
) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    kind = Text(row.kind, style="bold")
    if descriptor is not None and descriptor.display_name:
        kind.append(f"  {descriptor.display_name}", style="dim")
    pairs: list[tuple[str, RenderableType]] = [
        ("Job", Text(str(row.id), style="bold")),
        ("Kind", kind),
        ("State", state_text(row)),
        ("Queue", row.queue),
        ("Attempt", f"{row.attempt} of {row.max_attempts}"),
        ("Priority", str(row.priority)),
        ("Run lease", str(row.run_lease)),
        ("Storage", row.storage_path or "-"),
        ("Created", both(row.created_at, now)),
        ("Run at", both(row.run_at, now)),
        ("Attempted", both(row.attempted_at, now)),
        ("Finalized", both(row.finalized_at, now)),
        ("Tags", ", ".join(row.tags) if row.tags else Text("none", style="dim")),
        ("Unique key", unique_key_text(row)),
    ]
    if row.heartbeat_at is not None:
        pairs += [("Heartbeat", heartbeat_note(row, now)), ("", "")]
    if row.callback is not None:
        pairs += [
            ("Callback", f"{row.callback.state}, times out {both(row.callback.timeout_at, now)}"),
            ("", ""),
        ]
    if row.dlq is not None:
        pairs += [
            ("DLQ reason", Text(row.dlq.reason, style="red")),
            ("Dead-lettered", both(row.dlq.dlq_at, now)),
        ]
    for index in range(0, len(pairs), 2):
        left = pairs[index]
        right = pairs[index + 1] if index + 1 < len(pairs) else ("", "")
        grid.add_row(left[0], left[1], right[0], right[1])
    if row.callback is None:
        return grid
    # On a line of its own under the grid, which would squeeze (and cut) it to fit a column.
    callback_id = Text.assemble(
        ("Callback id  ", "bold"), (row.callback.callback_id, "bold magenta"), no_wrap=True
    )
    return Group(grid, callback_id)


ENDED = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)


def unique_key_text(row: JobRow) -> Text:
    """The key, and whether the job holds it now and in which states beyond the unfinished."""
    if row.unique_key is None:
        return Text("none", style="dim")
    text = Text(row.unique_key, style="bold")
    if row.holds_unique_key is None:
        return text
    # Every key is held through the unfinished states; only the ended ones vary.
    extra = [state.value for state in ENDED if state in (row.unique_states or [])]
    span = "while unfinished" + (f" or {', '.join(extra)}" if extra else "")
    if row.holds_unique_key:
        text.append(f"  held {span}", style="green")
    else:
        text.append(f"  released (held {span})", style="dim")
    return text
