"""``/api/jobs``: the detail (with its output), lists (without), an operator's enqueue of a new
job (``POST``, the console's form on Kinds), and the admin actions.

A list page and its counts come from one snapshot (``Client.browse``, what the console's job
browser shows), with the browser's time range and orders: an order no index serves is refused
with the reason, as the console and the Python API refuse it. Retry and cancel are refused with
409 when the job's state does not allow them, exactly as the console's actions are (the engine
decides, ``InvalidJobState``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from starlette.responses import Response

from awa_tui.http.auth import actor_of, writable
from awa_tui.http.bodies import (
    EnqueueBody,
    ErrorOut,
    JobListOut,
    JobOut,
    Reason,
    RetryJobBody,
    TimelineOut,
    client_of,
    compare_json,
    job_answer,
    job_json,
    json_response,
    page_json,
    reason_of,
    timeline_json,
)
from awa_tui.http.errors import ApiError
from awa_tui.http.paging import TIME_RANGE, decode_cursor
from awa_tui.http.search import Q_HELP, job_filter
from awa_tui.query import TAB_NAMES
from storage import InvalidFilter, JobNotFound, JobState, OutputMatch, SortColumn, SortOrder

MAX_PAGE = 500
JobId = Annotated[int, Path(ge=1, le=2**63 - 1)]
STATES = ", ".join([*JobState, "dlq"])
TABS = ", ".join(TAB_NAMES)

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
GONE = "Job {job_id} does not exist (it may have been deleted or pruned)."
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No job has this id."}
}


SORTS = ", ".join(column.value for column in SortColumn)
SORT_HELP = (
    f"{SORTS}; a leading - means descending (-when: latest first). Default -id, newest first. "
    "when is each state's time column (see since). attempts only for the live states "
    "(available, scheduled, retryable, running, waiting_external); oldest id first (id) not "
    "for completed or every state: no index serves those orders, so they are refused (400)."
)


OUT_HELP = (
    "Only jobs whose output holds this text in a value, as the console's out:TEXT (completed "
    "jobs by their output, others by the output their failed attempt kept). A path is matched "
    "with out.PATH=VALUE (out.status=partial, out.items.0.id=x-17), one at a time. Both need "
    "since: outputs are searched within a time range."
)


def output_match(text: str | None, request: Request) -> OutputMatch | None:
    """``out=TEXT`` and ``out.PATH=VALUE`` (a dotted path, one of each) as an ``OutputMatch``;
    ``InvalidFilter`` (400) when it cannot be read."""
    paths = [
        (k[len("out.") :], v) for k, v in request.query_params.multi_items() if k[:4] == "out."
    ]
    if len(paths) > 1:
        raise InvalidFilter("One out.PATH=VALUE at a time.")
    if not paths:
        return None if text is None else OutputMatch(text=text)
    return OutputMatch.at(*paths[0], text=text)


@router.get(
    "",
    response_model=JobListOut,
    responses={400: {"model": ErrorOut, "description": "A filter, order or cursor refused."}},
    summary="A page of jobs, newest first unless sorted, no outputs",
)
async def list_jobs(
    request: Request,
    state: Annotated[
        str | None, Query(description=f"One of {STATES}, or a console tab name ({TABS}).")
    ] = None,
    kind: str | None = None,
    queue: str | None = None,
    since: Annotated[
        str | None, Query(description=f"Only jobs at or after this moment: {TIME_RANGE}")
    ] = None,
    before: Annotated[
        str | None, Query(description="Only jobs before this moment (excluded), as since.")
    ] = None,
    sort: Annotated[str, Query(description=SORT_HELP)] = "-id",
    cursor: Annotated[
        str | None,
        Query(max_length=512, description="next_cursor of the previous page, with the same sort."),
    ] = None,
    before_id: Annotated[
        int | None,
        Query(
            ge=1,
            le=2**63 - 1,
            description="Newest first only: jobs older than this id (next_before_id).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    q: Annotated[str | None, Query(max_length=1024, description=Q_HELP)] = None,
    out: Annotated[str | None, Query(description=OUT_HELP)] = None,
) -> Response:
    found = job_filter(
        state=state,
        kind=kind,
        queue=queue,
        since=since,
        before=before,
        q=q,
        sort=SortOrder.parse(sort),
    )
    if found.job_id is not None:
        raise InvalidFilter(
            f"id:{found.job_id} names one job: GET /api/jobs/{found.job_id} reads it."
        )
    where, order = found.where, found.sort
    if before_id is not None and (cursor is not None or order != SortOrder()):
        raise ApiError(
            400,
            "invalid_request",
            "before_id pages the default order (newest first) only; pass cursor (next_cursor "
            "of the previous page) instead.",
        )
    output = output_match(out, request)
    if output is not None:
        if where.output is not None:
            raise InvalidFilter("Give the output search once: out in q or as out=, not both.")
        where = replace(where, output=output)
    page = await client_of(request).browse(
        where,
        sort=order,
        after=None if cursor is None else decode_cursor(cursor, order),
        before_id=before_id,
        limit=limit,
    )
    return json_response(page_json(page, order))


@router.get("/{job_id}", response_model=JobOut, responses=NOT_FOUND, summary="One job")
async def get_job(
    job_id: JobId,
    request: Request,
    compare: Annotated[
        Literal["kept"] | None,
        Query(
            description="kept: add the failed attempt's kept output, where each output came "
            "from, and the diff from it to the completed output (one snapshot)."
        ),
    ] = None,
) -> Response:
    client = client_of(request)
    account = await client.explain_job(job_id) if compare == "kept" else None
    row = account.row if account is not None else await client.get_job(job_id)
    if row is None:
        raise JobNotFound(GONE.format(job_id=job_id))
    body = job_json(row, detail=True)
    if account is not None:
        body["compare"] = compare_json(account)
    return json_response(body)


@router.post(
    "",
    status_code=201,
    response_model=JobOut,
    responses={
        400: {"model": ErrorOut, "description": "The args do not fit the kind (invalid_args)."},
        422: {"model": ErrorOut, "description": "No handler or descriptor knows the kind."},
    },
    dependencies=[Depends(writable)],
    summary="Enqueue a new job of a known kind (audited as enqueue)",
)
async def enqueue_job(body: EnqueueBody, request: Request) -> Response:
    row = await client_of(request).enqueue_job(
        body.kind,
        body.args,
        queue=body.queue,
        priority=body.priority,
        run_at=body.run_at,
        actor=actor_of(request),
        reason=body.reason,
    )
    return json_response(job_json(row, detail=True), 201, {"Location": f"/api/jobs/{row.id}"})


@router.get(
    "/{job_id}/timeline",
    response_model=TimelineOut,
    responses=NOT_FOUND,
    summary="A job's attempts, oldest first, with the runtime that claimed each",
)
async def job_timeline(job_id: JobId, request: Request) -> Response:
    read = await client_of(request).job_timeline(job_id)
    if read.row is None:
        raise JobNotFound(GONE.format(job_id=job_id))
    return json_response(timeline_json(job_id, read))


ACTION: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    409: {"model": ErrorOut, "description": "Not allowed in this state."},
}


@router.post(
    "/{job_id}/retry",
    response_model=JobOut,
    responses=ACTION,
    dependencies=[Depends(writable)],
    summary="Retry a failed, cancelled or dead-lettered job",
)
async def retry_job(
    job_id: JobId, request: Request, body: Annotated[RetryJobBody | None, Body()] = None
) -> Response:
    body = body or RetryJobBody()
    row = await client_of(request).retry_job(
        job_id, args=body.args, actor=actor_of(request), reason=body.reason
    )
    return job_answer(row)


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    responses=ACTION,
    dependencies=[Depends(writable)],
    summary="Cancel a job that has not finished",
)
async def cancel_job(job_id: JobId, request: Request, body: Reason = None) -> Response:
    row = await client_of(request).cancel_job(
        job_id, actor=actor_of(request), reason=reason_of(body)
    )
    return job_answer(row)


@router.delete(
    "/{job_id}",
    status_code=204,
    responses=ACTION,
    dependencies=[Depends(writable)],
    summary="Delete a completed, failed, cancelled or dead-lettered job",
)
async def delete_job(job_id: JobId, request: Request, body: Reason = None) -> Response:
    await client_of(request).delete_job(job_id, actor=actor_of(request), reason=reason_of(body))
    return Response(status_code=204)
