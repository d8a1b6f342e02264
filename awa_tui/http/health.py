"""``GET /healthz`` and ``GET /readyz``, on ``serve`` and on ``worker --metrics-port``, without a
token: load balancers and scrapers send none, and neither answer says more than a state.

``/healthz``: the process is up and answering (200, ``ok``), nothing read.
``/readyz``: the database is reachable and is awa-tui's at a version this release reads, with
the schema installed: ``Client.check_schema``, the check ``connect`` makes (one home for it,
``storage.db.schema_check``). Otherwise 503 and one line saying why (not migrated, another
tool's database, unreachable, too slow), the engine's own message, never a password.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import PlainTextResponse, Response

from awa_tui.http.bodies import client_of
from storage import AwaError, redact_secrets

CHECK_TIMEOUT_SECONDS = 5.0
"""``/readyz`` answers 503 when the check takes longer than this."""

router = APIRouter(tags=["health"])

TEXT: dict[str, Any] = {"content": {"text/plain": {}}}


@router.get(
    "/healthz",
    summary="The process is up",
    response_class=PlainTextResponse,
    responses={200: {**TEXT, "description": "ok"}},
)
async def healthz() -> Response:
    return PlainTextResponse("ok\n")


@router.get(
    "/readyz",
    summary="The database is reachable and migrated to a version this release reads",
    response_class=PlainTextResponse,
    responses={
        200: {**TEXT, "description": "ready"},
        503: {**TEXT, "description": "Not ready, and one line saying why."},
    },
)
async def readyz(request: Request) -> Response:
    client = client_of(request)
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            await client.check_schema()
    except AwaError as exc:
        return not_ready(redact_secrets(exc.message, client.dsn))
    except TimeoutError:
        return not_ready(
            f"no answer from the database within {CHECK_TIMEOUT_SECONDS:g} s (unreachable, "
            "or every pooled connection busy)"
        )
    return PlainTextResponse("ready\n")


def not_ready(reason: str) -> Response:
    line = " ".join(reason.split())
    return PlainTextResponse(f"not ready: {line}\n", 503, {"Retry-After": "5"})
