"""Who may call: a bearer token compared in constant time, and no writes in read-only mode.

The checks are ``async def`` although they never wait: FastAPI runs a plain ``def``
dependency in a worker thread, a thread hop per check per request.

The token comes from ``AWA_API_TOKEN`` (see ``serve``); ``None`` means ``--no-auth``, which
the command allows only on a loopback host. The token is never logged or echoed.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from awa_tui.http.errors import ApiError

bearer = HTTPBearer(auto_error=False, description="The value of AWA_API_TOKEN.")


@dataclass(frozen=True)
class Access:
    token: str | None
    """The expected bearer token; None: no authentication (``--no-auth``)."""
    read_only: bool


def access_of(request: Request) -> Access:
    access: Access = request.app.state.access
    return access


async def authorized(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Every ``/api`` route: 401 unless the request carries the token."""
    expected = access_of(request).token
    if expected is None:
        return
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise ApiError(
            401,
            "unauthorized",
            "This API needs the header `Authorization: Bearer <token>` with the server's "
            "AWA_API_TOKEN.",
            {"WWW-Authenticate": "Bearer"},
        )


async def writable(request: Request) -> None:
    """Every write: 403 when the server runs with ``--read-only``."""
    if access_of(request).read_only:
        raise ApiError(
            403,
            "read_only",
            "This server runs with --read-only (a read-only database session), so it changes "
            "no job.",
        )


API_ACTOR = "api"
"""The audit actor of a call made with the one unnamed ``AWA_API_TOKEN`` (or ``--no-auth``)."""


def actor_of(request: Request) -> str:
    """Who a request acts as, for the audit trail: the only place that decides it. Every
    write route passes this as ``actor=`` to the client."""
    del request  # one unnamed token today: every caller is the same one
    return API_ACTOR
