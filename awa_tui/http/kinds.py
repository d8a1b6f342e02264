"""``/api/kinds``: every kind with its descriptor, declared output type and schema, and counts
of its live jobs, and ``/api/kinds/{kind}/drift``: its recent outputs (completed, and kept by
failed attempts) that no longer fit its schema (what the console's kinds screen shows)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from awa_tui.http.admin_bodies import model_json
from awa_tui.http.bodies import ErrorOut, KindsOut, client_of, json_response, kind_json
from storage import DRIFT_WINDOW, MAX_DRIFT_LISTED, SchemaDrift

router = APIRouter(prefix="/api/kinds", tags=["kinds"])


@router.get("", response_model=KindsOut, summary="Kinds and their declared outputs")
async def list_kinds(request: Request) -> Response:
    kinds = await client_of(request).list_kinds()
    return json_response({"kinds": [kind_json(summary) for summary in kinds]})


@router.get(
    "/{kind}/drift",
    response_model=SchemaDrift,
    responses={400: {"model": ErrorOut, "description": "A kind name PostgreSQL cannot store."}},
    summary="The kind's recent stored outputs that do not fit its declared schema",
    description=f"Counted among {DRIFT_WINDOW} (``window``), as the console's K screen; the "
    f"newest {MAX_DRIFT_LISTED} listed by job, with the path and keyword each breaks, never "
    "the value; a failed attempt's kept output says so (``storage_path`` error entry, "
    "``kept_by``). A kind that declares no schema has nothing to check (``schema_declared``).",
)
async def kind_drift(
    kind: Annotated[str, Path(min_length=1, max_length=255)], request: Request
) -> Response:
    found = await client_of(request).schema_drift(kind)
    return json_response(model_json(found))
