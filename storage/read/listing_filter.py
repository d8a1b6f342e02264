"""What a list read filters and sorts by, and the one SQL fragment every per-state list
statement splices in (``storage.read.listing``).

The time filter (``since`` / ``before``) applies to each state's own time column, the one the
console shows as "when": available, scheduled and retryable jobs by ``run_at`` (when they
became or become runnable), running and waiting jobs by when their attempt was claimed,
completed, failed and cancelled jobs by ``finalized_at``, the DLQ by ``dlq_at``. ``since`` is
inclusive, ``before`` exclusive.

Sorting follows the indexes: ``id`` everywhere (newest first is the default); ``when`` (that
same time column) everywhere, through the time indexes for history (done entries since
migration v006, compact batches since v004, the DLQ) and by sorting the bounded set of work in
flight for the live states; ``attempts`` only for the live states, whose rows are bounded by
the work pending, never for history (no index holds an attempt count, so it would read it
all). Oldest first by ``id`` is refused where compact completions take part: their batches are
indexed by their newest job id only, so no walk can stop early in that direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, TypedDict

from storage.values.errors import InvalidFilter
from storage.values.models import TERMINAL_STATES, JobRow, JobState
from storage.values.names import unstorable

NO_BEFORE = 2**63 - 1
STATE_NAMES = ", ".join(state.value for state in JobState)


class SortColumn(StrEnum):
    """What a page is ordered by (ties broken by job id, in the same direction)."""

    ID = "id"
    WHEN = "when"
    """Each state's time column, the one the time filter uses (module docstring)."""
    ATTEMPTS = "attempts"


SortKey = tuple[datetime | int, int]
"""A row's place in an order, (value, job id): what ``SortOrder.key`` gives and ``after``
takes in place of the row (a caller that keeps no rows, e.g. the HTTP API's cursor)."""

_CURSOR_TYPES = {SortColumn.WHEN: "timestamptz", SortColumn.ATTEMPTS: "int"}
_FIRST = {
    (SortColumn.WHEN, True): datetime.max.replace(tzinfo=UTC),
    (SortColumn.WHEN, False): datetime.min.replace(tzinfo=UTC),
    (SortColumn.ATTEMPTS, True): 2**31 - 1,
    (SortColumn.ATTEMPTS, False): -1,
}


@dataclass(frozen=True)
class SortOrder:
    """``column`` and direction; ``parse("-when")`` is newest first by time (a leading ``-``
    means descending, as in most query languages), ``parse("id")`` oldest first by id."""

    column: SortColumn = SortColumn.ID
    descending: bool = True

    @classmethod
    def parse(cls, text: SortOrder | str) -> SortOrder:
        if isinstance(text, SortOrder):
            return text
        name = text.strip()
        descending = name.startswith("-")
        name = name.lstrip("-+").lower()
        try:
            return cls(SortColumn(name), descending)
        except ValueError:
            columns = ", ".join(c.value for c in SortColumn)
            raise InvalidFilter(
                f"Cannot sort by {_printable(name)}; use one of {columns} (-name for descending)."
            ) from None

    @property
    def text(self) -> str:
        return f"{'-' if self.descending else ''}{self.column.value}"

    def refusal(self, state: JobState | None, dlq: bool = False) -> str | None:
        """Why this order cannot be read cheaply for the state (None: it can)."""
        where = "dead-lettered jobs" if dlq else f"{state.value} jobs" if state else "all jobs"
        history = dlq or state is None or state in TERMINAL_STATES
        if self.column is SortColumn.ATTEMPTS and history:
            return (
                f"{where.capitalize()} cannot be sorted by attempts: no index holds the attempt "
                "count of finished jobs, so it would read the whole history."
            )
        oldest_id = self.column is SortColumn.ID and not self.descending
        if oldest_id and not dlq and state in (None, JobState.COMPLETED):
            return (
                f"{where.capitalize()} cannot be listed oldest id first: compact completions "
                "are indexed by their newest id only. Sort by when (oldest first) instead."
            )
        return None

    def key(self, row: JobRow) -> tuple[Any, int]:
        """The row's place in this order: (value, id)."""
        match self.column:
            case SortColumn.ID:
                return (row.id, row.id)
            case SortColumn.WHEN:
                return (row_time(row), row.id)
            case SortColumn.ATTEMPTS:
                return (row.attempt, row.id)

    def cursor(self, after: JobRow | SortKey | None, before_id: int | None) -> tuple[Any, int]:
        """The (value, id) a page starts after: ``after``'s place (a row, or the place ``key``
        gave for one, which a caller without the row can keep), else the first page's."""
        if isinstance(after, JobRow):
            return self.key(after)
        if after is not None:
            return self._checked(after)
        if self.column is SortColumn.ID:
            first = before_id or (NO_BEFORE if self.descending else -1)
            return (first, first)
        return (_FIRST[self.column, self.descending], NO_BEFORE if self.descending else -1)

    def _checked(self, place: SortKey) -> SortKey:
        """``place`` if it can be a place in this order (it reaches SQL as a typed parameter)."""
        value, job_id = place if isinstance(place, tuple) and len(place) == 2 else (None, None)
        if self.column is SortColumn.WHEN:
            fits = isinstance(value, datetime) and value.tzinfo is not None
        else:
            fits = _fits(value, _INT_BOUNDS[self.column])
        if not fits or not _fits(job_id, 2**63):
            wanted = "an aware datetime" if self.column is SortColumn.WHEN else "an int"
            raise InvalidFilter(
                f"after must be a row or its place in sort {self.text} (SortOrder.key): "
                f"a pair of {wanted} and a job id."
            )
        return place

    def sql(self, id_col: str, key: str | None, value_param: int) -> tuple[str, str]:
        """The cursor condition and the ORDER BY for a statement whose sort value is ``key``
        (the id order needs none) and whose cursor value is parameter ``value_param``."""
        op, direction = ("<", "DESC") if self.descending else (">", "ASC")
        if self.column is SortColumn.ID or key is None:
            return f"{id_col} {op} $1", f"{id_col} {direction}"
        cast = _CURSOR_TYPES[self.column]
        return (
            f"({key}, {id_col}) {op} (${value_param}::{cast}, $1)",
            f"{key} {direction}, {id_col} {direction}",
        )


DEFAULT_SORT = SortOrder()
_INT_BOUNDS = {SortColumn.ID: 2**63, SortColumn.ATTEMPTS: 2**31}  # bigint, int


def _fits(value: object, bound: int) -> bool:
    """An int (not a bool) the column's SQL type holds."""
    return type(value) is int and -bound <= value < bound


def row_time(row: JobRow) -> datetime | None:
    """The row's time column (module docstring): what ``when`` sorts and filters by."""
    if row.dlq is not None:
        return row.dlq.dlq_at
    if row.state in (JobState.RUNNING, JobState.WAITING_EXTERNAL):
        return row.attempted_at
    if row.state in TERMINAL_STATES:
        return row.finalized_at
    return row.run_at


def _scalars_match(value: str, pattern: str) -> str:
    """Whether a string, number or boolean anywhere in the jsonb ``value`` (``#>> '{}'`` is a
    scalar's text without JSON quoting) is ILIKE ``pattern``: what search text matches."""
    return f"""EXISTS (SELECT 1 FROM jsonb_path_query({value}, 'strict $.**') v
                    WHERE jsonb_typeof(v) IN ('string', 'number', 'boolean')
                      AND v #>> '{{}}' ILIKE {pattern})"""


KEPT_OUTPUT = "jsonb_path_query_first(%s, '$.errors[*].output')"
"""The output a failed attempt kept, from a payload: only the latest entry that recorded one
keeps it (ADR-048), so the first found is the one."""

# $1 cursor id, $2 kind, $3 queue, $4 search pattern (ILIKE, % _ \\ escaped), $5 limit,
# $6 since, $7 before, $8 output text pattern, $9 output path (text[]), $10 the value at that
# path; a statement's own parameters follow from $11, then the cursor value of a non-id order.
# The search looks at scalar values (``_scalars_match``). An output term looks at the output
# the row is searched by (%(output)s: the completed output of a completed job, on either path,
# else the output its failed attempt kept), compared as text: ``#>>`` gives a scalar's text
# without JSON quoting. A NULL bound folds away when PostgreSQL plans with the values.
FILTER = f"""
   AND %(cursor)s
   AND ($2::text IS NULL OR r.kind = $2)
   AND ($3::text IS NULL OR r.queue = $3)
   AND ($6::timestamptz IS NULL OR %(time)s >= $6)
   AND ($7::timestamptz IS NULL OR %(time)s < $7)
   AND ($4::text IS NULL OR r.kind ILIKE $4 OR r.queue ILIKE $4
        OR {_scalars_match("r.args", "$4")}
        OR {_scalars_match("%(payload)s", "$4")})
   AND ($8::text IS NULL AND $9::text[] IS NULL
        OR EXISTS (SELECT 1 FROM (SELECT %(output)s AS v) o
                    WHERE o.v IS NOT NULL
                      AND ($8::text IS NULL OR {_scalars_match("o.v", "$8")})
                      AND ($9::text[] IS NULL OR o.v #>> $9 = $10)))
"""
COMMON_PARAMS = 10


def _printable(value: object) -> str:
    return ascii(value) if isinstance(value, str) and len(value) <= 40 else "(given value)"


def parse_state(state: JobState | str | None) -> JobState | None:
    """The state named by ``state`` (a ``JobState`` or its string); refuses any other value."""
    if state is None or isinstance(state, JobState):
        return state
    try:
        return JobState(state)
    except ValueError:
        raise InvalidFilter(
            f"Unknown job state {_printable(state)}; use one of {STATE_NAMES}."
        ) from None


def check_text(what: str, value: str | None) -> str | None:
    """Refuse text PostgreSQL cannot take (a NUL, a lone surrogate) before it reaches the driver.
    The message names the position, never the text: search text can be anything."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidFilter(f"The {what} filter must be text.")
    reason = unstorable(value)
    if reason is not None:
        raise InvalidFilter(f"The {what} filter contains {reason}, so it cannot match.")
    return value


def check_moment(what: str, value: datetime | None) -> datetime | None:
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise InvalidFilter(f"{what} must be an aware datetime (with a time zone).")
    return value


MAX_OUTPUT_PATH = 16


@dataclass(frozen=True)
class OutputMatch:
    """What an output search looks for (ADR-048's retained outputs): ``text``, a substring of
    any string, number or boolean in the output, case-insensitively (``out:TEXT`` in the
    console); and/or ``value``, the exact text of the scalar at ``path`` (``out.PATH=VALUE``:
    ``("status",)`` and ``"partial"``; a number compares as written in JSON, ``412``; an array
    index is a path step, ``items.0``). Checked when built (``at`` reads a dotted path)."""

    text: str | None = None
    path: tuple[str, ...] | None = None
    value: str | None = None

    def __post_init__(self) -> None:
        check_text("output text", self.text)
        if self.text == "":
            raise InvalidFilter("out: needs the text to look for in outputs.")
        if (self.path is None) != (self.value is None):
            raise InvalidFilter("An output path needs a value: out.PATH=VALUE.")
        if self.path is not None:
            steps = self.path
            if not isinstance(steps, tuple) or not 0 < len(steps) <= MAX_OUTPUT_PATH:
                raise InvalidFilter(
                    f"An output path has 1 to {MAX_OUTPUT_PATH} steps: out.status=partial."
                )
            if any(not isinstance(step, str) or not step for step in steps):
                raise InvalidFilter("An output path has an empty step: write out.a.b=VALUE.")
            for step in steps:
                check_text("output path", step)
            check_text("output value", self.value)
        if self.text is None and self.path is None:
            raise InvalidFilter("An output search needs text (out:TEXT) or a path (out.PATH=V).")

    @classmethod
    def at(cls, dotted: str, value: str, text: str | None = None) -> OutputMatch:
        """The match for ``out.DOTTED=VALUE`` (``dotted`` is ``status`` or ``a.b.0``)."""
        if not isinstance(dotted, str):
            raise InvalidFilter("An output path must be text: out.status=partial.")
        return cls(text, tuple(dotted.split(".")), value)

    @property
    def dotted(self) -> str | None:
        return None if self.path is None else ".".join(self.path)


class FilterFields(TypedDict, total=False):
    """``ListFilter``'s fields as keywords (``state`` also as text)."""

    state: JobState | str | None
    dlq: bool
    kind: str | None
    queue: str | None
    search: str | None
    since: datetime | None
    before: datetime | None
    output: OutputMatch | None


@dataclass(frozen=True)
class ListFilter:
    """Which jobs a list read, a count or a bulk action is about: built once by a caller (the
    console from its filter line, the HTTP API from its query) and passed to ``browse``,
    ``list_jobs``, ``count_matching`` and ``bulk_action``.

    ``state`` with ``dlq`` False is one state's live or finished jobs (None: every state but
    the DLQ); ``dlq`` True is the dead-letter queue. ``search`` matches kind, queue and the
    values in args and payload (``storage.read.listing``); ``since``/``before`` bound each
    state's time column (the module docstring). ``output`` (``OutputMatch``) matches completed
    jobs by their output, on either path, and other jobs by the output their failed attempt
    kept; it needs ``since``, so that it reads one time range, never the whole history.
    Checked when built: an unknown state, text PostgreSQL cannot take, a naive moment, an
    empty time range or an output search without ``since`` raises ``InvalidFilter``.
    """

    state: JobState | None = None
    dlq: bool = False
    kind: str | None = None
    queue: str | None = None
    search: str | None = None
    since: datetime | None = None
    before: datetime | None = None
    output: OutputMatch | None = None

    def __post_init__(self) -> None:
        since, before = check_moment("since", self.since), check_moment("before", self.before)
        if since is not None and before is not None and since >= before:
            raise InvalidFilter("The time range is empty: since must be earlier than before.")
        object.__setattr__(self, "state", parse_state(self.state))
        for what in ("kind", "queue", "search"):
            check_text(what, getattr(self, what))
        if self.output is not None:
            if not isinstance(self.output, OutputMatch):
                raise InvalidFilter("The output filter must be an OutputMatch.")
            if since is None:
                raise InvalidFilter(
                    "An output search needs a time range start (since): outputs are searched "
                    "within a time range, never the whole history."
                )

    @classmethod
    def of(
        cls,
        *,
        state: JobState | str | None = None,
        dlq: bool = False,
        kind: str | None = None,
        queue: str | None = None,
        search: str | None = None,
        since: datetime | None = None,
        before: datetime | None = None,
        output: OutputMatch | None = None,
    ) -> ListFilter:
        """A filter from its fields, ``state`` also as text (``"failed"``)."""
        return cls(parse_state(state), dlq, kind, queue, search, since, before, output)

    @classmethod
    def given(cls, where: ListFilter | None, fields: FilterFields) -> ListFilter:
        """The filter a call names: ``where``, or its fields passed as keywords (a shorthand:
        ``list_jobs(state="failed")`` is ``list_jobs(ListFilter.of(state="failed"))``)."""
        if where is None:
            return cls.of(**fields)
        if fields:
            raise InvalidFilter("Pass a ListFilter or its fields as keywords, not both.")
        if not isinstance(where, ListFilter):
            raise InvalidFilter("The filter must be a ListFilter.")
        return where

    def params(self, cursor_id: int, limit: int) -> list[Any]:
        """$1..$10 of ``FILTER``."""
        out = self.output
        text, path, value = (out.text, out.path, out.value) if out else (None, None, None)
        return [
            cursor_id,
            self.kind,
            self.queue,
            _like(self.search),
            limit,
            self.since,
            self.before,
            _like(text),
            None if path is None else list(path),
            value,
        ]


def _like(text: str | None) -> str | None:
    """An ILIKE pattern matching ``text`` anywhere (``%``, ``_`` and ``\\`` escaped)."""
    if not text:
        return None
    escaped = text.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")
    return f"%{escaped}%"


def since_moment(since: datetime | timedelta | None) -> datetime | None:
    """A moment: a timedelta means that long ago; a naive datetime is refused."""
    if isinstance(since, timedelta):
        return datetime.now(UTC) - since
    if since is not None and since.tzinfo is None:
        raise InvalidFilter("since must be an aware datetime (with a time zone) or a timedelta.")
    return since
