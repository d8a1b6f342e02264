"""What ``GET /api/jobs`` reads from its query beyond the filters: the time range, in the
console's grammar (``since=1h``, ``before=2026-11-30T10:00``), and the place a page of a sorted
list continues after, handed out as an opaque ``cursor`` (a caller keeps no rows, so it cannot
pass one back the way a Python caller passes ``after=row``).

A cursor carries the order it was made for and the last row's place in it (``SortOrder.key``:
its sort value and id). It is base64url of small JSON, opaque by contract, not a secret: it
holds no more than the row it came from showed.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime

import orjson

from awa_tui.http.errors import ApiError
from awa_tui.query import TIME_HINT, read_moment
from storage import InvalidFilter, JobRow, SortColumn, SortKey, SortOrder

TIME_RANGE = (
    f"{TIME_HINT}; a duration counts back from now, a date or time without a zone is UTC. "
    "Each state's own time column: run_at for available, scheduled and retryable jobs, the "
    "claim time for running and waiting ones, the finish time for completed, failed and "
    "cancelled ones, dlq_at for the DLQ."
)
BAD_CURSOR = (
    "cursor is not one this API handed out; pass next_cursor from the previous page unchanged, "
    "or leave cursor out to start from the first page."
)


def _shown(value: str) -> str:
    """The value in a message when it is short, printable text; it is the caller's own query."""
    return value if len(value) <= 40 and value.isprintable() else "(the given value)"


def time_bound(name: str, value: str | None) -> datetime | None:
    """``since``/``before`` as a moment (``awa_tui.query.read_moment``); ``InvalidFilter``
    (400) with the reason when it cannot be read."""
    if value is None:
        return None
    text = value.strip()
    try:
        return read_moment(text, datetime.now(UTC))
    except ValueError as exc:
        hint = ""
        if " " in text:  # a "+" left unescaped in a query string arrives as a space
            hint = " (a + in a URL reads as a space: write it %2B, or use Z for UTC)"
        raise InvalidFilter(f"{name}={_shown(text)} {exc}{hint}.") from None


def encode_cursor(order: SortOrder, row: JobRow) -> str:
    """The cursor of the page that follows ``row`` in ``order``."""
    value, job_id = order.key(row)
    if isinstance(value, datetime):
        value = value.isoformat()
    elif not isinstance(value, int):  # every listed row has its time column
        raise TypeError(f"job {job_id} has no {order.column.value} value to page after")
    raw = orjson.dumps([order.text, value, job_id])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(text: str, order: SortOrder) -> SortKey:
    """The place ``text`` continues after, for a page in ``order``; a cursor that is not one
    ``encode_cursor`` made, or was made for another order, is a 400."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        made_for, value, job_id = orjson.loads(raw)
        made_order = SortOrder.parse(str(made_for))
        if order.column is SortColumn.WHEN and isinstance(value, str):
            value = datetime.fromisoformat(value)
    except (binascii.Error, ValueError, TypeError, InvalidFilter):
        raise ApiError(400, "invalid_cursor", BAD_CURSOR) from None
    if made_order != order:
        raise ApiError(
            400,
            "invalid_cursor",
            f"This cursor continues a list sorted by {made_order.text}; pass "
            f"sort={made_order.text} with it, or leave cursor out to start over in sort="
            f"{order.text}.",
        )
    try:
        order.cursor((value, job_id), None)  # the engine's check of a place in this order
    except InvalidFilter:
        raise ApiError(400, "invalid_cursor", BAD_CURSOR) from None
    return (value, job_id)
