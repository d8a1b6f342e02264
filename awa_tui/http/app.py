"""The application factory, used by ``awa-tui serve`` and by the tests alike.

The app does not own its ``Client``: the command connects it first (so a bad DSN is one line
on stderr and an exit code, before anything listens) and closes it after the server stops.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Depends, FastAPI
from prometheus_client import CollectorRegistry

from awa_tui.http import admin, audit, bulk, callbacks, errors, health, jobs, kinds, metrics
from awa_tui.http.auth import Access, authorized
from awa_tui.http.bodies import ErrorOut
from awa_tui.http.guard import GuardMiddleware
from awa_tui.http.tokens import NamedToken, api_token
from storage import Client

DESCRIPTION = """Awa-style Postgres queue storage with retained job output (ADR-048).

Every `/api` call needs `Authorization: Bearer <AWA_API_TOKEN>` unless the server runs with
`--no-auth`, and so does `/metrics`; `/healthz` and `/readyz` need none. Errors are
`{"error": code, "message": text}`. Bodies are at most 64 KiB."""


def create_app(
    client: Client,
    *,
    token: str | None = None,
    tokens: Sequence[NamedToken] | None = None,
    read_only: bool = False,
) -> FastAPI:
    """The API over ``client`` for the callers ``tokens`` names (or the one write token
    ``token``, named ``api``); neither disables authentication (``--no-auth``)."""
    app = FastAPI(
        title="awa-tui HTTP API",
        version="1",
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        # FastAPI's own OpenTelemetry spans carry the URL path (a callback id) and its logs
        # carry validation messages (sent values); its metrics (route, status) stay.
        telemetry={"tracing": False, "operation_spans": False, "logs": False},
    )
    app.state.client = client
    if tokens is None and token is not None:
        tokens = [api_token(token)]
    app.state.access = Access(tokens=tokens, read_only=read_only or client.read_only)
    api = {
        "dependencies": [Depends(authorized)],
        "responses": {
            401: {"model": ErrorOut, "description": "Missing or wrong bearer token."},
            403: {
                "model": ErrorOut,
                "description": "A write on a --read-only server, or with a read token.",
            },
            413: {"model": ErrorOut, "description": "A body over 64 KiB."},
            503: {"model": ErrorOut, "description": "The database cannot be reached."},
        },
    }
    for router in (callbacks.router, jobs.router, kinds.router, audit.router):
        app.include_router(router, **api)  # type: ignore[arg-type]
    for router in (bulk.jobs, admin.queues, admin.dlq, bulk.groups, admin.schedules):
        app.include_router(router, **api)  # type: ignore[arg-type]
    app.include_router(metrics.router, dependencies=[Depends(authorized)])
    app.include_router(health.router)
    errors.install(app)
    app.add_middleware(GuardMiddleware)
    return app


def create_probe_app(client: Client, runtime_metrics: CollectorRegistry) -> FastAPI:
    """``worker --metrics-port``: ``/metrics`` (the queue gauges and ``runtime_metrics``, the
    worker's own), ``/healthz`` and ``/readyz``, without a token (the port is the worker's
    own, on loopback unless ``--metrics-host`` says otherwise)."""
    app = FastAPI(
        title="awa-tui worker metrics",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        telemetry={"tracing": False, "operation_spans": False, "logs": False},
    )
    app.state.client = client
    app.state.runtime_metrics = runtime_metrics
    app.include_router(metrics.router)
    app.include_router(health.router)
    errors.install(app)
    app.add_middleware(GuardMiddleware)
    return app
