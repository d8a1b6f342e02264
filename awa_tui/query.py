"""What the job browser shows: a state tab and the filter (``kind:``, ``queue:``, ``id:``,
``since:``, ``before:``, ``sort:``, ``out:``, ``out.PATH=VALUE`` and text)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from storage import (
    InvalidFilter,
    JobRow,
    JobState,
    ListFilter,
    OutputMatch,
    SortColumn,
    SortOrder,
)

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


NEWEST = SortOrder()
"""The default order: newest id first."""

OUTPUT_WINDOW = timedelta(hours=1)
OUTPUT_WINDOW_TEXT = "1h"
"""The time range an output search reads when the filter has no ``since:``: the hour up to
``before:`` (or now). Storage searches outputs only within a range (``ListFilter.output``)."""


class FilterSyntaxError(ValueError):
    """The filter text could not be read."""


UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
DURATION = re.compile(r"(\d+)([smhdw])")
TIME_HINT = "a duration (30s, 15m, 1h, 2d, 1w) or an ISO date or time (2026-11-30T10:00)"


def read_moment(value: str, now: datetime) -> datetime:
    """A ``since``/``before`` value, the console's and the HTTP API's: a duration means that
    long before ``now``; an ISO date or date-time without a zone is UTC, the zone the console
    shows. Refuses with ``ValueError`` whose text completes "since:VALUE ..."."""
    duration = DURATION.fullmatch(value)
    if duration:
        amount, unit = duration.groups()
        try:
            return now - timedelta(**{UNITS[unit]: int(amount)})
        except OverflowError:
            raise ValueError("reaches back too far") from None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"is not {TIME_HINT}") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def moment(key: str, value: str, now: datetime) -> datetime:
    """``since:``/``before:`` in the filter (``read_moment``), refused as a filter error."""
    try:
        return read_moment(value, now)
    except ValueError as exc:
        raise FilterSyntaxError(f"Filter: {key}:{value} {exc}.") from None


def sort_order(text: str) -> SortOrder:
    """``sort:`` values: ``id``, ``when``, ``attempts``, ``-`` first for descending."""
    try:
        return SortOrder.parse(text)
    except InvalidFilter as exc:
        raise FilterSyntaxError(f"Filter: {exc}") from None


WHEN_LABELS = {
    "all": "time",
    "available": "run-at time",
    "scheduled": "run-at time",
    "retryable": "retry time",
    "running": "claim time",
    "waiting_external": "claim time",
    "completed": "finish time",
    "failed": "finish time",
    "cancelled": "finish time",
    "dlq": "dead-letter time",
}


@dataclass(frozen=True)
class JobQuery:
    """One browser view. ``job_id`` narrows to a single job (``id:42``)."""

    tab: str = "all"
    kind: str | None = None
    queue: str | None = None
    job_id: int | None = None
    search: str | None = None
    since: str | None = None
    """As typed (``1h``, ``2026-11-30``): a duration is read against the clock at each load."""
    before: str | None = None
    sort: SortOrder = NEWEST
    output: OutputMatch | None = None
    """``out:TEXT`` and ``out.PATH=VALUE``: jobs by their output (``ListFilter.output``)."""

    @property
    def state(self) -> JobState | None:
        return None if self.tab in ("all", "dlq") else JobState(self.tab)

    @property
    def dlq(self) -> bool:
        return self.tab == "dlq"

    def where(self, now: datetime) -> ListFilter:
        """The jobs this view lists, counts and acts on (the sort is passed to ``browse``
        apart: a bulk action has none); ``since``/``before`` durations are read against
        ``now``. A value storage refuses raises ``InvalidFilter``."""
        before = moment("before", self.before, now) if self.before else None
        since = moment("since", self.since, now) if self.since else None
        if since is None and self.output is not None:
            since = (before or now) - OUTPUT_WINDOW
        return ListFilter(
            self.state, self.dlq, self.kind, self.queue, self.search, since, before, self.output
        )

    @property
    def default_window(self) -> bool:
        """Whether an output search reads ``OUTPUT_WINDOW`` because no ``since:`` was typed."""
        return self.output is not None and self.since is None

    @property
    def has_time_range(self) -> bool:
        return bool(self.since or self.before or self.default_window)

    @property
    def has_filter(self) -> bool:
        """Whether anything narrows the rows (a sort does not)."""
        return bool(self.narrowing or self.has_time_range)

    @property
    def narrowing(self) -> bool:
        """Whether kind, queue, id, text or output narrow the rows (what tab counts ignore)."""
        return bool(
            self.kind or self.queue or self.search or self.output or self.job_id is not None
        )

    def sort_refusal(self) -> str | None:
        """Why this tab's rows cannot be read in ``sort`` (None: they can)."""
        return self.sort.refusal(self.state, self.dlq)

    def describe_sort(self) -> str:
        """``newest first``, ``by finish time, latest first``, ``fewest attempts first``."""
        order, down = self.sort, self.sort.descending
        match order.column:
            case SortColumn.ID:
                return "newest first" if down else "oldest first"
            case SortColumn.WHEN:
                return f"by {WHEN_LABELS[self.tab]}, {'latest' if down else 'earliest'} first"
            case SortColumn.ATTEMPTS:
                return "most attempts first" if down else "fewest attempts first"

    def matches(self, row: JobRow) -> bool:
        """Whether ``row`` fits the tab and ``kind:``/``queue:``."""
        if (self.kind and row.kind != self.kind) or (self.queue and row.queue != self.queue):
            return False
        if self.tab == "all":
            return row.dlq is None
        if self.tab == "dlq":
            return row.dlq is not None
        return row.dlq is None and row.state is JobState(self.tab)

    def with_tab(self, tab: str) -> JobQuery:
        """This view on ``tab`` (the rest of the filter kept)."""
        return replace(self, tab=tab)

    def with_filter(self, text: str, now: datetime) -> JobQuery:
        """This view with the filter ``text``; refuses (``FilterSyntaxError``) a value that
        cannot be read, an empty time range or an order this tab's rows cannot be read in."""
        parsed = parse_filter(text)
        query = replace(
            self,
            kind=parsed.kind,
            queue=parsed.queue,
            job_id=parsed.job_id,
            search=parsed.search,
            since=parsed.since,
            before=parsed.before,
            sort=parsed.sort,
            output=parsed.output,
        )
        since = moment("since", query.since, now) if query.since else None
        before = moment("before", query.before, now) if query.before else None
        if since and before and since >= before:
            raise FilterSyntaxError("Filter: since: must be earlier than before:.")
        refusal = query.sort_refusal()
        if refusal is not None:
            raise FilterSyntaxError(f"Filter: {refusal}")
        return query

    def with_sort(self, sort: SortOrder) -> JobQuery:
        return replace(self, sort=sort)

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
        if self.output is not None:
            parts.append(f"whose output {describe_output(self.output)}")
        if self.since:
            parts.append(f"since {self.since}")
        if self.before:
            parts.append(f"before {self.before}")
        if self.default_window:
            window = "in the hour up to before:" if self.before else f"since {OUTPUT_WINDOW_TEXT}"
            parts.append(f"{window} (the default for out:; since: widens it)")
        if self.job_id is not None:
            parts.append(f"with id {self.job_id}")
        return " ".join(parts)


def tab_of(row: JobRow) -> str:
    """The one tab that lists ``row``: its state's, or the DLQ's."""
    return "dlq" if row.dlq is not None else row.state.value


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
    """``kind:send_email queue:mail id:42 since:1h sort:-when some words`` -> a query (tab
    left at ``all``). Time values are checked here and read against the clock at each load.

    Quotes group words (``"gateway timeout"``); a quote without its pair is a character to
    find, and a backslash is always itself, so any text a person types can be searched for.
    """
    tokens = _tokens(text)
    kind = queue = since = before = None
    job_id: int | None = None
    sort = NEWEST
    words: list[str] = []
    out = _OutputTerms()
    for token in tokens:
        key, sep, value = token.partition(":")
        if out.read(token):
            continue
        if sep and key in ("kind", "queue", "id", "since", "before", "sort"):
            if not value:
                raise FilterSyntaxError(f"Filter: {key}: needs a value.")
            if key == "kind":
                kind = value
            elif key == "queue":
                queue = value
            elif key in ("since", "before"):
                moment(key, value, datetime.now(UTC))  # refuses what it cannot read
                since, before = (value, before) if key == "since" else (since, value)
            elif key == "sort":
                sort = sort_order(value)
            else:
                try:
                    job_id = int(value.lstrip("#"))
                except ValueError as exc:
                    raise FilterSyntaxError(f"Filter: id:{value} is not a job id.") from exc
        else:
            words.append(token)
    search = " ".join(words) or None
    return JobQuery(
        kind=kind,
        queue=queue,
        job_id=job_id,
        search=search,
        since=since,
        before=before,
        sort=sort,
        output=out.match(),
    )


class _OutputTerms:
    """``out:TEXT`` and ``out.PATH=VALUE`` as they are read from the filter, one of each."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.path: tuple[str, str] | None = None

    def read(self, token: str) -> bool:
        """Take ``token`` if it is an output term (True); refuse one that cannot be read."""
        if token.startswith("out:"):
            if self.text is not None:
                raise FilterSyntaxError("Filter: one out: term at a time (quote several words).")
            self.text = token[len("out:") :]
            if not self.text:
                raise FilterSyntaxError("Filter: out: needs the text to look for in outputs.")
            return True
        if not token.startswith("out."):
            return False
        dotted, sep, value = token[len("out.") :].partition("=")
        if not sep or not dotted or not value:
            raise FilterSyntaxError(
                "Filter: an output path is out.PATH=VALUE (out.status=partial, out.a.b=1)."
            )
        if self.path is not None:
            raise FilterSyntaxError("Filter: one out.PATH=VALUE term at a time.")
        self.path = (dotted, value)
        return True

    def match(self) -> OutputMatch | None:
        if self.text is None and self.path is None:
            return None
        try:
            if self.path is None:
                return OutputMatch(text=self.text)
            return OutputMatch.at(*self.path, text=self.text)
        except InvalidFilter as exc:
            raise FilterSyntaxError(f"Filter: {exc}") from None


def describe_output(match: OutputMatch) -> str:
    """``has status = "partial"`` / ``contains "timeout"`` for the status line."""
    parts = []
    if match.dotted is not None:
        parts.append(f'has {match.dotted} = "{match.value}"')
    if match.text is not None:
        parts.append(f'contains "{match.text}"')
    return " and ".join(parts)


def _quoted(value: str) -> str:
    """``value`` as the filter reads it back as one token."""
    if not value or not any(c.isspace() or c in "\"'" for c in value):
        return value
    return f"'{value}'" if '"' in value else f'"{value}"'


def format_filter(query: JobQuery) -> str:
    parts = []
    if query.kind:
        parts.append(f"kind:{query.kind}")
    if query.queue:
        parts.append(f"queue:{query.queue}")
    if query.job_id is not None:
        parts.append(f"id:{query.job_id}")
    if query.since:
        parts.append(f"since:{query.since}")
    if query.before:
        parts.append(f"before:{query.before}")
    if query.sort != NEWEST:
        parts.append(f"sort:{query.sort.text}")
    if query.output is not None:
        if query.output.text is not None:
            parts.append(f"out:{_quoted(query.output.text)}")
        if query.output.dotted is not None and query.output.value is not None:
            parts.append(f"out.{query.output.dotted}={_quoted(query.output.value)}")
    if query.search:
        parts.append(query.search)
    return " ".join(parts)
