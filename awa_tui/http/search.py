"""Which jobs a list or a bulk action is about, from the HTTP query: the state (a job state or
a console tab), ``kind``, ``queue``, ``since``/``before`` and ``q``, the console's filter text
(``kind:send_email queue:mail since:1h sort:-when gateway timeout``, read by
``awa_tui.query.parse_filter``, so the API and the console's ``/`` accept the same text and
refuse it with the same message).

A field given both in ``q`` and as its own parameter is refused (which one was meant?).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from awa_tui.http.paging import time_bound
from awa_tui.query import NEWEST, FilterSyntaxError, moment, parse_filter, tab_named
from storage import InvalidFilter, ListFilter, SortOrder

Q_HELP = (
    "The console's filter text, as typed after / in the job browser: kind:K queue:Q id:N "
    "since:1h before:2026-11-30T10:00 sort:-when, and words searched in kind, queue, args "
    "and payload (quotes group words). Not together with the same field as its own parameter."
)


@dataclass(frozen=True)
class Search:
    """A filter read from a query: ``where`` the jobs, ``sort`` as ``q`` says (or as given),
    ``job_id`` when ``q`` names one job (``id:N``)."""

    where: ListFilter
    sort: SortOrder
    job_id: int | None = None


def state_filter(state: str | None) -> tuple[str | None, bool]:
    """``state`` as the engine's state and the DLQ flag: a job state, or a console tab name
    (``waiting``, ``failed``, ``all``, ``dlq``); an unknown one is refused by the engine."""
    if state is not None:
        state = tab_named(state) or state
    if state == "dlq":
        return None, True
    return (None if state == "all" else state), False


def job_filter(
    *,
    state: str | None,
    kind: str | None,
    queue: str | None,
    since: str | None,
    before: str | None,
    q: str | None = None,
    sort: SortOrder = NEWEST,
) -> Search:
    """The jobs these parameters name; ``InvalidFilter`` (400) with the reason otherwise."""
    engine_state, dlq = state_filter(state)
    where = ListFilter.of(
        state=engine_state,
        dlq=dlq,
        kind=kind,
        queue=queue,
        since=time_bound("since", since),
        before=time_bound("before", before),
    )
    return searched(where, sort, q)


def searched(where: ListFilter, sort: SortOrder, q: str | None) -> Search:
    """``where`` and ``sort`` narrowed by the filter text ``q`` (None: as they are)."""
    if q is None or not q.strip():
        return Search(where, sort)
    try:
        parsed = parse_filter(q)
        now = datetime.now(UTC)
        since = moment("since", parsed.since, now) if parsed.since else None
        before = moment("before", parsed.before, now) if parsed.before else None
    except FilterSyntaxError as exc:
        raise InvalidFilter(str(exc)) from None
    given = {
        "kind": (parsed.kind, where.kind),
        "queue": (parsed.queue, where.queue),
        "since": (since, where.since),
        "before": (before, where.before),
        "sort": (parsed.sort != NEWEST or None, sort != NEWEST or None),
    }
    for name, (in_q, as_param) in given.items():
        if in_q is not None and as_param is not None:
            raise InvalidFilter(f"{name} is given twice, in q ({name}:) and as {name}=; keep one.")
    narrowed = replace(
        where,
        kind=parsed.kind or where.kind,
        queue=parsed.queue or where.queue,
        search=parsed.search,
        since=since or where.since,
        before=before or where.before,
        output=parsed.output or where.output,
    )
    return Search(narrowed, parsed.sort if parsed.sort != NEWEST else sort, parsed.job_id)
