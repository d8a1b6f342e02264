"""``/api/callbacks/{callback_id}/...``: the HTTP door of external completion (ADR-048).

An invalid output is a 400 and completes nothing: the job keeps waiting, so the sender can
retry with a corrected one. A valid output the schema cannot store (no output columns yet) is
dropped, counted by the engine, and the completion goes ahead, because a webhook sender cannot
recover from a refused completion; the answer then says ``Awa-Output-Dropped:
schema_missing``. The payload is accepted and neither stored nor logged. Each body takes an
optional ``reason``, kept in the write's audit entry as every operator write's is.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request
from starlette.responses import Response

from awa_tui.http.auth import actor_of, writable
from awa_tui.http.bodies import (
    CompleteBody,
    ErrorOut,
    FailBody,
    HeartbeatBody,
    HeartbeatOut,
    JobOut,
    RetryBody,
    client_of,
    job_answer,
    json_response,
)
from storage import ExternalCompletion

router = APIRouter(
    prefix="/api/callbacks/{callback_id}",
    tags=["callbacks"],
    dependencies=[Depends(writable)],
    responses={
        400: {"model": ErrorOut, "description": "Invalid body or output; nothing was written."},
        404: {"model": ErrorOut, "description": "Unknown or already resolved callback."},
        409: {"model": ErrorOut, "description": "run_lease names an attempt that has ended."},
    },
)


@router.post("/complete", response_model=JobOut, summary="Complete a waiting job")
async def complete(
    callback_id: str, request: Request, body: Annotated[CompleteBody | None, Body()] = None
) -> Response:
    body = body or CompleteBody()
    row = await client_of(request).complete_external_with(
        callback_id,
        ExternalCompletion(output=body.output, run_lease=body.run_lease),
        actor=actor_of(request),
        reason=body.reason,
    )
    dropped = body.output is not None and row.output_text is None
    return job_answer(row, {"Awa-Output-Dropped": "schema_missing"} if dropped else None)


@router.post("/fail", response_model=JobOut, summary="Fail a waiting job for good")
async def fail(callback_id: str, request: Request, body: FailBody) -> Response:
    row = await client_of(request).fail_external(
        callback_id,
        body.error,
        run_lease=body.run_lease,
        actor=actor_of(request),
        reason=body.reason,
    )
    return job_answer(row)


@router.post("/retry", response_model=JobOut, summary="Run a waiting job again from attempt 0")
async def retry(
    callback_id: str, request: Request, body: Annotated[RetryBody | None, Body()] = None
) -> Response:
    body = body or RetryBody()
    row = await client_of(request).retry_external(
        callback_id, run_lease=body.run_lease, actor=actor_of(request), reason=body.reason
    )
    return job_answer(row)


@router.post("/heartbeat", response_model=HeartbeatOut, summary="Push the callback's timeout out")
async def heartbeat(
    callback_id: str, request: Request, body: Annotated[HeartbeatBody | None, Body()] = None
) -> Response:
    body = body or HeartbeatBody()
    timeout = body.timeout_seconds
    await client_of(request).heartbeat_callback(
        callback_id, timeout, actor=actor_of(request), reason=body.reason
    )
    return json_response({"callback_id": callback_id, "timeout_seconds": timeout})
