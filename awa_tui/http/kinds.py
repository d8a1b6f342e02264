"""``/api/kinds``: every kind with its descriptor, declared output type and schema, and counts
of its live jobs (what the console's kinds screen shows)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from awa_tui.http.bodies import KindsOut, client_of, json_response, kind_json

router = APIRouter(prefix="/api/kinds", tags=["kinds"])


@router.get("", response_model=KindsOut, summary="Kinds and their declared outputs")
async def list_kinds(request: Request) -> Response:
    kinds = await client_of(request).list_kinds()
    return json_response({"kinds": [kind_json(summary) for summary in kinds]})
