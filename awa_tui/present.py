"""How jobs read on screen: state styles, contextual times, kind labels. Pure functions."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from awa_tui.timefmt import absolute, relative
from storage import (
    HEARTBEAT_STALE_SECONDS,
    JobKindDescriptor,
    JobRow,
    RuntimeInfo,
    SortColumn,
    SortOrder,
)

STATE_STYLES: dict[str, str] = {
    "available": "cyan",
    "running": "bold blue",
    "waiting_external": "bold magenta",
    "scheduled": "dim cyan",
    "retryable": "yellow",
    "failed": "bold red",
    "completed": "green",
    "cancelled": "dim",
    "dlq": "bold red reverse",
}

SHORT_STATE = {"waiting_external": "waiting"}

OUTPUT_MARK = "◆"
KEPT_OUTPUT_MARK = "◇"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 error entry``, ``3 error entries``, ``1,204 jobs``."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def state_label(row: JobRow) -> str:
    """``dead-lettered`` for a DLQ row (its state says failed), else the state's name."""
    return "dead-lettered" if row.dlq is not None else row.state.value


def state_key(row: JobRow) -> str:
    return "dlq" if row.dlq is not None else row.state.value


def state_text(row: JobRow, *, short: bool = False) -> Text:
    key = state_key(row)
    label = SHORT_STATE.get(key, key) if short else key
    return Text(label, style=STATE_STYLES.get(key, ""))


BY_WHEN = SortOrder(SortColumn.WHEN)


def contextual_time(row: JobRow, now: datetime) -> str:
    """The job's time column relative to ``now``: the time ``since:``/``before:`` filter on and
    ``sort:when`` orders by (read through the sort's own key), so the column always reads in
    the order the rows are sorted.

    Queued, claimed and finished times read ``5m ago``; scheduled and retry times ``in 3m``.
    A waiting job shows when it was claimed, as a running one does; its callback's deadline is
    in the detail screen (``Callback ... times out``).
    """
    moment, _job_id = BY_WHEN.key(row)
    return relative(moment, now)


STALE_MARK = "⚠ stale"


def heartbeat_text(row: JobRow, now: datetime) -> Text:
    """A running job's heartbeat age (``12s ago``), marked ``⚠ stale`` past the rescue
    threshold: its worker is presumed dead and maintenance rescues it. Empty otherwise."""
    if row.heartbeat_at is None:
        return Text("")
    age = relative(row.heartbeat_at, now)
    if row.heartbeat_stale(now):
        return Text(f"{age} {STALE_MARK}", style="bold yellow")
    return Text(age, style="dim")


def heartbeat_note(row: JobRow, now: datetime) -> Text:
    """The detail's line: the age, and for a stale one what it means."""
    text = heartbeat_text(row, now)
    if row.heartbeat_stale(now):
        text.append(
            f": worker presumed dead (rescue after {HEARTBEAT_STALE_SECONDS:g}s)", style="yellow"
        )
    return text


def kind_text(kind: str, descriptor: JobKindDescriptor | None) -> Text:
    """``send_email`` plus the descriptor's display name, dimmed, when it says more."""
    text = Text(kind)
    name = descriptor.display_name if descriptor is not None else None
    if name and name.casefold() != kind.replace("_", " ").casefold():
        text.append(f" {name}", style="dim")
    return text


def output_marker(row: JobRow) -> Text:
    if row.has_output or row.output_text is not None:
        return Text(OUTPUT_MARK, style="green")
    if row.kept_output_position() is not None:
        return Text(KEPT_OUTPUT_MARK, style="yellow")
    return Text(" ")


def one_line(text: str | None, width: int) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def attempt_text(row: JobRow) -> str:
    return f"{row.attempt}/{row.max_attempts}"


def size_text(size: int) -> str:
    return f"{size:,} B"


def runtime_label(runtime: RuntimeInfo | None, *, full: bool = False) -> str:
    """The runtime that claimed an attempt: ``worker-a:4242, started 06:30`` (UTC); ``full``
    adds its name, version and registry id. ``runtime 17 (no longer registered)`` once its
    registry row was pruned; ``-`` when none was recorded (claimed before migration v010, by
    an earlier release, or not claimed)."""
    if runtime is None:
        return "-"
    if runtime.host is None or runtime.started_at is None:
        return f"runtime {runtime.id} (no longer registered)"
    label = f"{runtime.host}:{runtime.pid}, started {absolute(runtime.started_at)[11:16]}"
    if not full:
        return label
    parts = [p for p in (runtime.name, runtime.version and f"awa-tui {runtime.version}") if p]
    return f"{label} ({', '.join([*parts, f'runtime {runtime.id}'])})"


def runtime_short(runtime: RuntimeInfo | None, width: int) -> str:
    """``worker-a:4242`` in at most ``width`` characters: a long host is cut, never the pid."""
    if runtime is None or runtime.host is None:
        return "-" if runtime is None else f"#{runtime.id}"
    pid = f":{runtime.pid}"
    if len(runtime.host) + len(pid) <= width:
        return runtime.host + pid
    return runtime.host[: max(0, width - len(pid) - 1)] + "…" + pid
