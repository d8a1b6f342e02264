"""What the job browser shows: a state tab and the filter (``kind:``, ``queue:``, ``id:``, text)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from typing import Any

from storage import JobRow, JobState

TABS: tuple[str, ...] = (
    "all",
    *(
        s.value
        for s in (
            JobState.AVAILABLE,
            JobState.RUNNING,
            JobState.WAITING_EXTERNAL,
            JobState.SCHEDULED,
            JobState.RETRYABLE,
            JobState.FAILED,
            JobState.COMPLETED,
            JobState.CANCELLED,
        )
    ),
    "dlq",
)
"""State tabs in display order; ``all`` and ``dlq`` are not job states."""

TAB_LABELS = {
    "all": "All",
    "available": "Available",
    "running": "Running",
    "waiting_external": "Waiting",
    "scheduled": "Scheduled",
    "retryable": "Retryable",
    "failed": "Failed",
    "completed": "Completed",
    "cancelled": "Cancelled",
    "dlq": "DLQ",
}

TAB_KEYS = {tab: str((index + 1) % 10) for index, tab in enumerate(TABS)}
"""One key per tab, as in k9s: ``1`` All, ``2`` Available, ... ``0`` DLQ."""


def tab_named(name: str) -> str | None:
    """The tab a person means by ``name``: a tab id or its label, any case (``waiting``)."""
    wanted = name.strip().lower()
    for tab in TABS:
        if wanted in (tab, TAB_LABELS[tab].lower()):
            return tab
    return None


TAB_NAMES = tuple(TAB_LABELS[tab].lower() for tab in TABS)
"""What ``--state`` accepts (besides the tab ids): ``all, available, ..., waiting, ..., dlq``."""


class FilterSyntaxError(ValueError):
    """The filter text could not be read."""


@dataclass(frozen=True)
class JobQuery:
    """One browser view. ``job_id`` narrows to a single job (``id:42``)."""

    tab: str = "all"
    kind: str | None = None
    queue: str | None = None
    job_id: int | None = None
    search: str | None = None

    @property
    def state(self) -> JobState | None:
        return None if self.tab in ("all", "dlq") else JobState(self.tab)

    @property
    def dlq(self) -> bool:
        return self.tab == "dlq"

    def list_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Client.list_jobs`` / ``count_matching`` / ``bulk_action``."""
        return {
            "state": self.state,
            "dlq": self.dlq,
            "kind": self.kind,
            "queue": self.queue,
            "search": self.search,
        }

    def matches(self, row: JobRow) -> bool:
        """Whether ``row`` fits ``kind:``/``queue:`` (and the tab, unless ``id:`` names it)."""
        if (self.kind and row.kind != self.kind) or (self.queue and row.queue != self.queue):
            return False
        if self.job_id is not None:
            return True  # an id lookup finds the job whatever tab is showing
        if self.tab == "all":
            return row.dlq is None
        if self.tab == "dlq":
            return row.dlq is not None
        return row.dlq is None and row.state is JobState(self.tab)

    def with_tab(self, tab: str) -> JobQuery:
        return replace(self, tab=tab)

    def with_filter(self, text: str) -> JobQuery:
        parsed = parse_filter(text)
        return replace(
            self, kind=parsed.kind, queue=parsed.queue, job_id=parsed.job_id, search=parsed.search
        )

    @property
    def filter_text(self) -> str:
        return format_filter(self)

    def describe(self, count: int | None = None) -> str:
        """``failed jobs of kind send_email matching "timeout"`` for confirmations; ``count``
        prefixes it (``1 failed job``, ``12 failed jobs``)."""
        noun = "job" if count == 1 else "jobs"
        subject = {"all": noun, "dlq": f"dead-lettered {noun}"}.get(
            self.tab, f"{TAB_LABELS[self.tab].lower()} {noun}"
        )
        if count is not None:
            subject = f"{count:,} {subject}"
        parts = [subject]
        if self.kind:
            parts.append(f"of kind {self.kind}")
        if self.queue:
            parts.append(f"in queue {self.queue}")
        if self.search:
            parts.append(f'matching "{self.search}"')
        if self.job_id is not None:
            parts.append(f"with id {self.job_id}")
        return " ".join(parts)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # "#" is a character (id:#42)
    lexer.escape = ""  # a backslash is a character, not an escape
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: no grouping, every character taken as typed
        return text.split()


def parse_filter(text: str) -> JobQuery:
    """``kind:send_email queue:mail id:42 some words`` -> a query (tab left at ``all``).

    Quotes group words (``"gateway timeout"``); a quote without its pair is a character to
    find, and a backslash is always itself, so any text a person types can be searched for.
    """
    tokens = _tokens(text)
    kind = queue = None
    job_id: int | None = None
    words: list[str] = []
    for token in tokens:
        key, sep, value = token.partition(":")
        if sep and key in ("kind", "queue", "id"):
            if not value:
                raise FilterSyntaxError(f"Filter: {key}: needs a value.")
            if key == "kind":
                kind = value
            elif key == "queue":
                queue = value
            else:
                try:
                    job_id = int(value.lstrip("#"))
                except ValueError as exc:
                    raise FilterSyntaxError(f"Filter: id:{value} is not a job id.") from exc
        else:
            words.append(token)
    search = " ".join(words) or None
    return JobQuery(kind=kind, queue=queue, job_id=job_id, search=search)


def format_filter(query: JobQuery) -> str:
    parts = []
    if query.kind:
        parts.append(f"kind:{query.kind}")
    if query.queue:
        parts.append(f"queue:{query.queue}")
    if query.job_id is not None:
        parts.append(f"id:{query.job_id}")
    if query.search:
        parts.append(query.search)
    return " ".join(parts)
