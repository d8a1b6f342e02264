"""``GET /api/audit``: the audit trail of operator writes, newest first (``Client.list_audit``,
one statement). Entries hold no output or payload text; an edit-and-retry's entry holds the
job's original args."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from starlette.responses import Response

from awa_tui.http.bodies import ErrorOut, client_of, json_response
from awa_tui.http.paging import time_bound
from awa_tui.query import TIME_HINT
from storage import MAX_AUDIT_ENTRIES, AuditEntry

router = APIRouter(prefix="/api/audit", tags=["audit"])


class AuditOut(BaseModel):
    entries: list[AuditEntry]
    """Newest first; the engine's own model (``storage.AuditEntry``), so no field drifts."""


def entry_json(entry: AuditEntry) -> dict[str, Any]:
    return entry.model_dump(mode="json")


@router.get(
    "",
    response_model=AuditOut,
    responses={400: {"model": ErrorOut, "description": "A filter refused."}},
    summary="Operator writes, newest first: who, when, what and why",
)
async def list_audit(
    request: Request,
    since: Annotated[
        str | None, Query(description=f"Only entries at or after this moment: {TIME_HINT}.")
    ] = None,
    actor: Annotated[str | None, Query(description="Only this actor's entries.")] = None,
    action: Annotated[
        str | None, Query(description="Only this action (retry_job, bulk_retry, ...).")
    ] = None,
    job_id: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_ENTRIES)] = 100,
) -> Response:
    entries = await client_of(request).list_audit(
        since=time_bound("since", since), actor=actor, action=action, job_id=job_id, limit=limit
    )
    return json_response({"entries": [entry_json(e) for e in entries]})
