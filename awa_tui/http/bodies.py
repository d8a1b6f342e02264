"""Request and response shapes (they are what ``/openapi.json`` describes) and the one
serializer of job rows.

A job's output is written into the response exactly as stored (``orjson.Fragment`` of its JSON
text, never decoded and re-encoded), so ``1.0`` stays ``1.0`` and key order is kept. List rows
carry no output: not the completed one, and not a failed attempt's in an error entry.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import orjson
from fastapi import Body, Request
from pydantic import AwareDatetime, BaseModel, Field
from starlette.responses import Response

from awa_tui.http.paging import encode_cursor
from awa_tui.present import runtime_label
from storage import (
    MAX_OUTPUT_BYTES,
    Client,
    DlqInfo,
    JobAccount,
    JobKindDescriptor,
    JobPage,
    JobRow,
    JobState,
    JobTimeline,
    KindSummary,
    RuntimeInfo,
    SortOrder,
    StateCounts,
    error_positions,
    json_diff,
)

MAX_HEARTBEAT_SECONDS = 7 * 24 * 3600
NOTHING_TO_COMPARE = (
    "Job {job_id} has no completed output beside a failed attempt's kept one, so there is "
    "nothing to compare."
)


class ActionBody(BaseModel):
    """An operator write's optional body: why, for its audit entry."""

    reason: str | None = Field(
        None, max_length=1000, description="Why, kept in the audit trail (GET /api/audit)."
    )


Reason = Annotated[ActionBody | None, Body()]
"""A write route's optional ``{"reason": ...}`` body (omitted, or null: no reason)."""


def reason_of(body: ActionBody | None) -> str | None:
    return body.reason if body is not None else None


class CompleteBody(ActionBody):
    payload: Any = Field(
        None, description="Accepted for senders that send one; never stored, never logged."
    )
    output: Any = Field(
        None,
        description=f"The job's output: any JSON value up to {MAX_OUTPUT_BYTES} bytes, checked "
        "against the kind's declared output schema. Omitted or null: no output.",
    )
    run_lease: int | None = Field(
        None, description="The attempt you saw; another attempt's callback answers 409."
    )


class FailBody(ActionBody):
    error: str = Field(min_length=1, max_length=4096, description="Kept in the error history.")
    run_lease: int | None = None


class RetryBody(ActionBody):
    run_lease: int | None = None


class RetryJobBody(ActionBody):
    args: Any = Field(
        None,
        description="New args for the retry (an edit-and-retry), checked against the kind's "
        "args type or published args_schema; the audit entry keeps the original args. "
        "Omitted or null: the job's own args.",
    )


class EnqueueBody(ActionBody):
    kind: str = Field(
        min_length=1, max_length=200, description="A kind with a handler or a published descriptor."
    )
    args: Any = Field(
        description="The job's args, checked against the kind's published args_schema (GET "
        "/api/kinds) or, where this server registers the kind, its args type."
    )
    queue: str | None = Field(
        None,
        max_length=200,
        description="Omitted: the queue the kind's descriptor names, else default.",
    )
    priority: int = Field(2, ge=1, le=4, description="1 is the highest.")
    run_at: AwareDatetime | None = Field(
        None, description="A moment with a time zone; a future one enqueues the job scheduled."
    )


class HeartbeatBody(ActionBody):
    timeout_seconds: float = Field(
        3600,
        gt=0,
        le=MAX_HEARTBEAT_SECONDS,
        description="The callback times out this many seconds from now.",
    )


class CallbackInfoOut(BaseModel):
    callback_id: str
    timeout_at: datetime | None
    state: str


class JobOut(BaseModel):
    """One job. ``output`` and the ``output`` key of error entries appear only in the detail
    (``GET /api/jobs/{id}``) and in callback and action answers, never in lists."""

    id: int
    kind: str
    queue: str
    state: JobState
    args: Any
    priority: int
    attempt: int
    max_attempts: int
    run_lease: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None
    finalized_at: datetime | None
    unique_key: str | None
    unique_states: list[str] | None = Field(
        None, description="The states in which the job holds its unique key (detail only)."
    )
    holds_unique_key: bool | None = Field(
        None, description="Whether the job holds its unique key now (detail only)."
    )
    duplicate: bool = Field(
        False, description="An insert returned this existing holder of its key instead."
    )
    tags: list[str]
    metadata: dict[str, Any]
    errors: list[dict[str, Any]] = Field(
        description='Error entries, oldest first: {"error", "attempt", "at", "terminal"?, '
        '"output"?, "traceback"?}. At most one keeps an output: see kept_output_position. '
        "traceback: a handler exception's frames, file:line in function (detail only)."
    )
    progress: Any
    output: Any = Field(None, description="The completed output as stored; absent in lists.")
    has_output: bool = Field(description="Whether the job has a completed output.")
    kept_output_position: int | None = Field(
        description="Index in errors of the entry that kept a failed attempt's output."
    )
    callback: CallbackInfoOut | None
    dlq: DlqInfo | None
    storage_path: str | None = Field(description='"compact" or "general" for completed jobs.')
    heartbeat_at: datetime | None = Field(
        None,
        description="A running job's last heartbeat (its claim until the first one); past "
        "the rescue threshold (60 s by default) its worker is presumed dead.",
    )
    declared_output_type: str | None = Field(
        description="The output type the kind's descriptor declares (detail only)."
    )
    compare: CompareOut | None = Field(None, description="Only with ?compare=kept.")


class JsonChangeOut(BaseModel):
    path: str = Field(description='Where, as a JSON path: $.items[3].name, $["odd key"].')
    change: Literal["added", "removed", "changed", "retyped"]
    before: str | None = Field(description="Compact JSON, cut to 60 characters; null if added.")
    after: str | None = Field(description="Compact JSON, cut to 60 characters; null if removed.")


class OutputDiffOut(BaseModel):
    changes: list[JsonChangeOut] = Field(description="In document order, at most 4 KiB.")
    omitted: int = Field(description="Changes past the 4 KiB bound, not listed.")
    counts: dict[str, int] = Field(description="Changes of each kind, listed or not.")


class CompareOut(BaseModel):
    """``?compare=kept``: the failed attempt's kept output beside the completed one."""

    kept_position: int | None = Field(description="Index in errors of the entry that kept it.")
    kept_output: Any = Field(None, description="That output, as read from the error history.")
    kept_provenance: str | None = Field(description="Which attempt kept it, when it goes.")
    output_provenance: str | None = Field(
        description="Which attempt wrote the completed output, by which path, when it goes."
    )
    diff: OutputDiffOut | None = Field(
        description="From the kept output to the completed one; null unless both exist."
    )
    reason: str | None = Field(description="Why there is nothing to compare, when there is not.")


class AttemptOut(BaseModel):
    """One readiness of the job and the attempt claimed from it (``Client.job_timeline``)."""

    run_lease: int
    attempt: int | None = Field(description="Null until claimed; restarts after a DLQ retry.")
    ready_at: datetime
    claimed_at: datetime | None
    deadline_at: datetime | None
    heartbeat_at: datetime | None = Field(description="While the attempt runs only.")
    progress: Any
    callback_id: str | None
    callback_timeout_at: datetime | None
    waiting: bool
    ended_at: datetime | None
    outcome: str | None = Field(
        description="How it ended as stored: completed, retried, error, rescued, snoozed, ..."
    )
    runtime: RuntimeInfo | None = Field(
        description="The runtime that claimed it (its registry row: host, pid, started_at, "
        "name, version; only id once the row is pruned). Null: not claimed, or claimed "
        "before migration v010 or by an earlier release."
    )
    runtime_label: str | None = Field(
        description='The runtime as the console shows it: "host:pid, started HH:MM" (UTC).'
    )
    error: str | None = Field(description="The error entry this attempt wrote, if any.")
    error_position: int | None = Field(
        description="Its index in the job's errors (matched by position, not attempt number)."
    )


class TimelineOut(BaseModel):
    job_id: int
    attempts: list[AttemptOut] = Field(description="Oldest first, read in one snapshot.")


def timeline_json(job_id: int, read: JobTimeline) -> dict[str, Any]:
    """``TimelineOut``: each span with its runtime and, by position, its error entry."""
    errors = read.row.errors if read.row is not None else []
    attempts = []
    for span, at in zip(read.spans, error_positions(read.spans, errors), strict=True):
        data = span.model_dump(mode="json")
        data["runtime_label"] = None if span.runtime is None else runtime_label(span.runtime)
        data["error"] = None if at is None else errors[at].get("error")
        data["error_position"] = at
        attempts.append(data)
    return {"job_id": job_id, "attempts": attempts}


class JobListOut(BaseModel):
    jobs: list[JobOut] = Field(description="In the order asked for; rows carry no output.")
    counts: StateCounts = Field(
        description="Jobs per state, read in the page's snapshot. They follow since and "
        "before; kind and queue do not narrow them."
    )
    has_more: bool
    sort: str = Field(description="The order of the page, e.g. -id (newest first) or -when.")
    next_cursor: str | None = Field(
        description="Pass as cursor (with the same sort) for the next page; null on the last."
    )
    next_before_id: int | None = Field(
        description="In the default order (-id) only: pass as before_id for the next page."
    )


class KindOut(BaseModel):
    kind: str
    output_type: str | None = Field(description="The declared output type's name.")
    output_schema: dict[str, Any] | None = Field(description="Its JSON Schema (2020-12).")
    descriptor: JobKindDescriptor | None
    counts: dict[JobState, int] = Field(description="Live jobs per state.")
    dlq: int
    stale: bool = Field(description="No runtime has refreshed the descriptor lately.")


class KindsOut(BaseModel):
    kinds: list[KindOut]


class HeartbeatOut(BaseModel):
    callback_id: str
    timeout_seconds: float


class ErrorOut(BaseModel):
    error: str = Field(description="A stable code, e.g. invalid_output, callback_not_found.")
    message: str
    reason: str | None = Field(None, description="invalid_output only: why.")
    path: str | None = Field(None, description="invalid_output only: the JSON path.")


def json_response(
    content: Any, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(orjson.dumps(content), status, headers, media_type="application/json")


def client_of(request: Request) -> Client:
    client: Client = request.app.state.client
    return client


def job_answer(row: JobRow | None, headers: dict[str, str] | None = None) -> Response:
    """The job as it is after a write; 204 if it was pruned or deleted in between."""
    if row is None:
        return Response(status_code=204)
    return json_response(job_json(row, detail=True), headers=headers)


_DETAIL_ONLY = frozenset({"output", "traceback"})  # error entries' keys a list row leaves out


def job_json(row: JobRow, *, detail: bool) -> dict[str, Any]:
    """A row as ``JobOut``; ``detail`` False leaves every output and traceback out (list rows)."""
    data = row.model_dump(mode="json", exclude={"output_text"})
    data["kept_output_position"] = row.kept_output_position()
    if detail:
        data["output"] = None if row.output_text is None else orjson.Fragment(row.output_text)
    else:
        data["errors"] = [{k: v for k, v in e.items() if k not in _DETAIL_ONLY} for e in row.errors]
    return data


def compare_json(account: JobAccount) -> dict[str, Any]:
    """``CompareOut`` for a job read with ``Client.explain_job``."""
    row, kept = account.row, account.kept_output()
    kept_origin, origin = account.kept_provenance(), account.provenance()
    both = row is not None and kept is not None and row.output_text is not None
    diff = None
    if both and row is not None and kept is not None:
        found = json_diff(kept[1], row.output)
        diff = {
            "changes": [vars(change) for change in found.changes],
            "omitted": found.omitted,
            "counts": found.counts,
        }
    now = account.facts.read_at
    return {
        "kept_position": None if kept is None else kept[0],
        "kept_output": None if kept is None else kept[1],
        "kept_provenance": None if kept_origin is None else kept_origin.text(now),
        "output_provenance": None if origin is None else origin.text(now),
        "diff": diff,
        "reason": None if both else NOTHING_TO_COMPARE.format(job_id=account.job_id),
    }


def page_json(page: JobPage, order: SortOrder) -> dict[str, Any]:
    last = page.rows[-1] if page.has_more and page.rows else None
    return {
        "jobs": [job_json(row, detail=False) for row in page.rows],
        "counts": page.counts.model_dump(mode="json"),
        "has_more": page.has_more,
        "sort": order.text,
        "next_cursor": None if last is None else encode_cursor(order, last),
        "next_before_id": last.id if last is not None and order == SortOrder() else None,
    }


def kind_json(summary: KindSummary) -> dict[str, Any]:
    descriptor = summary.descriptor
    return {
        "kind": summary.kind,
        "output_type": descriptor.output_type_name if descriptor else None,
        "output_schema": descriptor.output_schema if descriptor else None,
        **summary.model_dump(mode="json", include={"descriptor", "counts", "dlq", "stale"}),
    }
