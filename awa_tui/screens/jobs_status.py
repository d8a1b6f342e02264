"""The job browser's status line and sort keys, apart from the screen: what the rows are, in
which order, what the tab counts follow, and how ``s`` / ``o`` move through the orders."""

from __future__ import annotations

from dataclasses import dataclass, replace

from awa_tui.query import NEWEST, JobQuery
from storage import SortColumn, SortOrder


@dataclass(frozen=True)
class BrowserStatus:
    """Everything the status line says, read from the screen at one moment."""

    query: JobQuery
    shown: int
    has_more: bool
    dlq_matches: int
    marked: int
    stale_since: str | None
    paused: bool
    interval: float
    note: str | None
    loading: bool = False
    """No page of this query was shown yet (a new tab, filter or sort is being read)."""
    origin: str | None = None
    """The screen a drill-down was opened from: esc goes back to it."""
    elsewhere: str | None = None
    """Where an ``id:`` lookup's job is, when this tab does not list it."""

    def text(self) -> str:
        query = self.query
        parts = []
        if self.origin is not None:
            parts.append(f"from {self.origin} (esc goes back; R, X, D act on jobs)")
        if self.note:
            parts.append(self.note)
        if self.stale_since is not None:
            parts.append(f"STALE: rows as of {self.stale_since}")
        if self.loading:
            parts.append(f"loading {query.describe()}, {query.describe_sort()}…")
        elif self.shown:
            parts.append(f"{query.describe(self.shown)} shown, {query.describe_sort()}")
        elif query.job_id is not None:  # never a state the job is not in
            parts.append(f"No {replace(query, tab='all').describe()} on this tab")
        else:
            parts.append(f"No {query.describe()}")
        if self.elsewhere is not None:
            parts.append(self.elsewhere)
        if self.has_more:
            parts.append("more below (n)")
        if self.dlq_matches:
            parts.append(f"{self.dlq_matches:,} dead-lettered also match: DLQ tab (0)")
        parts.extend(counts_note(query))
        if self.marked:
            parts.append(f"{self.marked} marked")
        if self.paused:
            parts.append("live refresh paused (p)")
        else:
            parts.append(f"live refresh every {self.interval:g}s (p pauses, +/-)")
        parts.append("1-0 tabs · ? keys · ctrl+p palette")
        return " · ".join(parts)


def counts_note(query: JobQuery) -> list[str]:
    """What the tab counts follow: the time range (``storage.read.counting`` bounds it by index),
    never kind, queue, id or text (counting those would read every matching row)."""
    if query.narrowing:
        follows = " (they follow the time range)" if query.has_time_range else ""
        return [f"tab counts ignore kind/queue/id/text{follows}"]
    if query.has_time_range:
        return ["tab counts: this time range"]
    return []


COLUMNS = tuple(SortColumn)


def next_sort(query: JobQuery) -> JobQuery:
    """``s``: the next column this tab's rows can be read in, keeping the direction where the
    tab allows it (else descending); back to newest first after the last."""
    current = COLUMNS.index(query.sort.column)
    for step in range(1, len(COLUMNS)):
        column = COLUMNS[(current + step) % len(COLUMNS)]
        for descending in (query.sort.descending, True):
            candidate = query.with_sort(SortOrder(column, descending))
            if candidate.sort_refusal() is None:
                return candidate
    return query.with_sort(NEWEST)


def fitted(query: JobQuery) -> tuple[JobQuery, str | None]:
    """``query`` on a tab whose rows cannot be read in its order: newest first, and why."""
    refusal = query.sort_refusal()
    if refusal is None:
        return query, None
    return query.with_sort(NEWEST), f"Sorted newest first: {refusal}"
