"""Who may call: a named bearer token compared in constant time, its role, and no writes in
read-only mode.

The checks are ``async def`` although they never wait: FastAPI runs a plain ``def``
dependency in a worker thread, a thread hop per check per request.

The tokens come from ``--tokens``, ``AWA_API_TOKENS`` and ``AWA_API_TOKEN`` (see ``serve`` and
``tokens``); ``None`` means ``--no-auth``, which the command allows only on a loopback host.
The caller's token is hashed and compared with every known token's hash, with no early exit,
so the time taken does not say which one (if any) matched. A token is never logged or echoed.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from awa_tui.http.errors import ApiError
from awa_tui.http.tokens import API_TOKEN_NAME, NamedToken, Role, digest_of

bearer = HTTPBearer(
    auto_error=False,
    description="A token of the server's --tokens file or AWA_API_TOKENS (each named, with the "
    "role read or write: a read token gets 403 on every write), or AWA_API_TOKEN (write).",
)


@dataclass(frozen=True)
class Access:
    tokens: Sequence[NamedToken] | None
    """The known tokens; None: no authentication (``--no-auth``)."""
    read_only: bool


@dataclass(frozen=True)
class Caller:
    """The token a request authenticated with (``request.state.caller``)."""

    name: str
    role: Role


NO_AUTH = Caller(API_TOKEN_NAME, Role.WRITE)
"""The caller of a ``--no-auth`` server (loopback only)."""


def access_of(request: Request) -> Access:
    access: Access = request.app.state.access
    return access


def match(tokens: Sequence[NamedToken], given: str) -> NamedToken | None:
    """The token ``given`` is, compared with every one of ``tokens`` (no early exit)."""
    digest = digest_of(given)
    found = None
    for token in tokens:
        if hmac.compare_digest(digest, token.digest):
            found = token
    return found


async def authorized(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Every ``/api`` route: 401 unless the request carries a known token; the caller's name
    and role go on ``request.state.caller``."""
    tokens = access_of(request).tokens
    if tokens is None:
        request.state.caller = NO_AUTH
        return
    token = match(tokens, credentials.credentials if credentials is not None else "")
    if token is None:
        raise ApiError(
            401,
            "unauthorized",
            "This API needs the header `Authorization: Bearer <token>` with one of the "
            "server's tokens (--tokens, AWA_API_TOKENS or AWA_API_TOKEN).",
            {"WWW-Authenticate": "Bearer"},
        )
    request.state.caller = Caller(token.name, token.role)


def caller_of(request: Request) -> Caller | None:
    """Who ``authorized`` let in; None on a route it did not guard."""
    caller: Caller | None = getattr(request.state, "caller", None)
    return caller


def actor_of(request: Request) -> str:
    """The audit actor of an HTTP call: the token's name."""
    caller = caller_of(request)
    return API_TOKEN_NAME if caller is None else caller.name


async def writable(request: Request) -> None:
    """Every write: 403 when the server runs with ``--read-only`` or the token's role is read."""
    if access_of(request).read_only:
        raise ApiError(
            403,
            "read_only",
            "This server runs with --read-only (a read-only database session), so it changes "
            "no job.",
        )
    caller = caller_of(request)
    if caller is None or caller.role is not Role.WRITE:  # no caller: fail closed
        name = "" if caller is None else f" {caller.name}"
        raise ApiError(
            403,
            "forbidden",
            f"The token{name} has the read role; this call changes jobs and needs a write token.",
        )
