"""The console's admin screens over HTTP: ``/api/queues`` (list, pause, resume), ``/api/dlq``
(list, retry, purge) and ``/api/schedules`` (list, trigger now). Each calls the ``Client``
method its console screen calls, so the guards are the engine's: purging a job that is not
dead-lettered is a 409 with the reason, an unknown id or schedule a 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from awa_tui.http.admin_bodies import (
    QueuesOut,
    QueueStateOut,
    SchedulesOut,
    model_json,
)
from awa_tui.http.auth import actor_of, writable
from awa_tui.http.bodies import (
    ErrorOut,
    JobListOut,
    JobOut,
    Reason,
    client_of,
    job_answer,
    json_response,
    page_json,
    reason_of,
)
from awa_tui.http.jobs import ACTION, MAX_PAGE, JobId
from awa_tui.http.search import Q_HELP, job_filter
from storage import InvalidFilter, SortOrder

QueueName = Annotated[str, Path(min_length=1, max_length=255)]
ScheduleName = Annotated[str, Path(min_length=1, max_length=255)]

queues = APIRouter(prefix="/api/queues", tags=["queues"])
dlq = APIRouter(prefix="/api/dlq", tags=["dlq"])
schedules = APIRouter(prefix="/api/schedules", tags=["schedules"])
WRITE: dict[str, Any] = {"dependencies": [Depends(writable)]}
BAD_NAME: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "A name PostgreSQL cannot store."}
}


@queues.get("", response_model=QueuesOut, summary="Every queue: depth by state, lag, pause")
async def list_queues(request: Request) -> Response:
    found = await client_of(request).list_queues()
    return json_response({"queues": [model_json(q) for q in found]})


@queues.post(
    "/{queue}/pause",
    response_model=QueueStateOut,
    responses=BAD_NAME,
    summary="Stop every runtime claiming from the queue (running jobs finish)",
    **WRITE,
)
async def pause_queue(queue: QueueName, request: Request, body: Reason = None) -> Response:
    await client_of(request).pause_queue(queue, actor=actor_of(request), reason=reason_of(body))
    return json_response({"queue": queue, "paused": True})


@queues.post(
    "/{queue}/resume",
    response_model=QueueStateOut,
    responses=BAD_NAME,
    summary="Let runtimes claim from the queue again (idle ones are woken)",
    **WRITE,
)
async def resume_queue(queue: QueueName, request: Request, body: Reason = None) -> Response:
    await client_of(request).resume_queue(queue, actor=actor_of(request), reason=reason_of(body))
    return json_response({"queue": queue, "paused": False})


@dlq.get(
    "",
    response_model=JobListOut,
    responses={400: {"model": ErrorOut, "description": "A filter refused."}},
    summary="A page of dead-lettered jobs, newest first, no outputs",
)
async def list_dlq(
    request: Request,
    kind: str | None = None,
    queue: str | None = None,
    q: Annotated[str | None, Query(max_length=1024, description=Q_HELP)] = None,
    before_id: Annotated[
        int | None, Query(ge=1, le=2**63 - 1, description="next_before_id of the last page.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> Response:
    found = job_filter(state="dlq", kind=kind, queue=queue, since=None, before=None, q=q)
    if found.job_id is not None or found.sort != SortOrder():
        raise InvalidFilter("The DLQ list is newest first and takes no id: or sort: in q.")
    page = await client_of(request).browse(found.where, before_id=before_id, limit=limit)
    return json_response(page_json(page, SortOrder()))


@dlq.post(
    "/{job_id}/retry",
    response_model=JobOut,
    responses=ACTION,
    summary="Move a dead-lettered job back to its queue (attempt 0, errors kept)",
    **WRITE,
)
async def retry_dlq(job_id: JobId, request: Request, body: Reason = None) -> Response:
    row = await client_of(request).retry_dlq(
        job_id, actor=actor_of(request), reason=reason_of(body)
    )
    return job_answer(row)


@dlq.post(
    "/{job_id}/purge",
    status_code=204,
    responses=ACTION,
    summary="Delete a dead-lettered job for good",
    **WRITE,
)
async def purge_dlq(job_id: JobId, request: Request, body: Reason = None) -> Response:
    await client_of(request).purge_dlq(job_id, actor=actor_of(request), reason=reason_of(body))
    return Response(status_code=204)


@schedules.get("", response_model=SchedulesOut, summary="The stored periodic schedules")
async def list_schedules(request: Request) -> Response:
    found = await client_of(request).list_schedules()
    return json_response({"schedules": [model_json(s) for s in found]})


@schedules.post(
    "/{name}/trigger",
    response_model=JobOut,
    responses={
        **BAD_NAME,
        404: {"model": ErrorOut, "description": "No stored schedule has this name."},
    },
    summary="Enqueue one job of the schedule now (its next tick stays)",
    **WRITE,
)
async def trigger_schedule(name: ScheduleName, request: Request, body: Reason = None) -> Response:
    row = await client_of(request).trigger_schedule(
        name, actor=actor_of(request), reason=reason_of(body)
    )
    return job_answer(row)
