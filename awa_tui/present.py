"""How jobs read on screen: state styles, contextual times, kind labels. Pure functions."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from awa_tui.timefmt import relative
from storage import JobKindDescriptor, JobRow, JobState

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


def contextual_time(row: JobRow, now: datetime) -> str:
    """The one time that matters for the job's state, relative to ``now``.

    Queued, started and finished times read ``5m ago``; scheduled and retry times ``in 3m``;
    a waiting job shows when its callback times out (``due in 55m``).
    """
    if row.dlq is not None:
        return relative(row.dlq.dlq_at, now)
    match row.state:
        case JobState.AVAILABLE | JobState.SCHEDULED | JobState.RETRYABLE:
            return relative(row.run_at, now)
        case JobState.RUNNING:
            return relative(row.attempted_at or row.run_at, now)
        case JobState.WAITING_EXTERNAL:
            if row.callback is not None and row.callback.timeout_at is not None:
                return f"due {relative(row.callback.timeout_at, now)}"
            return relative(row.attempted_at, now)
        case JobState.COMPLETED | JobState.FAILED | JobState.CANCELLED:
            return relative(row.finalized_at, now)


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
