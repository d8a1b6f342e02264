"""``/api/jobs``: the detail (with its output), lists (without), and the admin actions.

A list page and its counts come from one snapshot (``Client.browse``, what the console's job
browser shows). Retry and cancel are refused with 409 when the job's state does not allow
them, exactly as the console's actions are (the engine decides, ``InvalidJobState``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from awa_tui.http.auth import writable
from awa_tui.http.bodies import (
    ErrorOut,
    JobListOut,
    JobOut,
    client_of,
    job_answer,
    job_json,
    json_response,
    page_json,
)
from storage import JobNotFound, JobState

MAX_PAGE = 500
JobId = Annotated[int, Path(ge=1, le=2**63 - 1)]
STATES = ", ".join([*JobState, "dlq"])

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No job has this id."}
}


@router.get("", response_model=JobListOut, summary="A page of jobs, newest first, no outputs")
async def list_jobs(
    request: Request,
    state: Annotated[str | None, Query(description=f"One of {STATES}.")] = None,
    kind: str | None = None,
    queue: str | None = None,
    before_id: Annotated[
        int | None,
        Query(ge=1, le=2**63 - 1, description="Only jobs older than this id (next_before_id)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> Response:
    dlq = state == "dlq"
    page = await client_of(request).browse(
        state=None if dlq else state,
        dlq=dlq,
        kind=kind,
        queue=queue,
        before_id=before_id,
        limit=limit,
    )
    return json_response(page_json(page))


@router.get("/{job_id}", response_model=JobOut, responses=NOT_FOUND, summary="One job")
async def get_job(job_id: JobId, request: Request) -> Response:
    row = await client_of(request).get_job(job_id)
    if row is None:
        raise JobNotFound(f"Job {job_id} does not exist (it may have been deleted or pruned).")
    return json_response(job_json(row, detail=True))


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
async def retry_job(job_id: JobId, request: Request) -> Response:
    return job_answer(await client_of(request).retry_job(job_id))


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    responses=ACTION,
    dependencies=[Depends(writable)],
    summary="Cancel a job that has not finished",
)
async def cancel_job(job_id: JobId, request: Request) -> Response:
    return job_answer(await client_of(request).cancel_job(job_id))
