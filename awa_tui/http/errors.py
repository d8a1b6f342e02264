"""The one place where errors become HTTP responses: a status, a stable code, a message.

Every error body is ``{"error": code, "message": text}`` (an invalid output adds ``reason``
and ``path``). Messages come from the engine, which names positions and types but never an
output, a payload or args; an unexpected exception is reduced to its type and place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from awa_tui.resilience import unexpected_summary
from storage import (
    ArgsValidationError,
    AwaError,
    CallbackNotFound,
    ConfigError,
    ConnectionFailed,
    InvalidFilter,
    InvalidJobState,
    InvalidOption,
    JobNotFound,
    OperationTimeout,
    OutputError,
    PermissionDenied,
    ReadOnlyError,
    ScheduleNotFound,
    SchemaNotMigrated,
    StaleAttempt,
    UnknownKind,
    UnstorableText,
)

log = logging.getLogger("awa_tui.http")

# Most specific first: the first class an error is an instance of decides.
ENGINE_ERRORS: tuple[tuple[type[AwaError], int, str], ...] = (
    (OutputError, 400, "invalid_output"),
    (InvalidFilter, 400, "invalid_filter"),
    (ConfigError, 400, "invalid_request"),  # InvalidName: a kind or queue PG cannot store
    (UnstorableText, 400, "invalid_request"),  # an error text with a NUL
    (ArgsValidationError, 400, "invalid_args"),  # an edit-and-retry's or an enqueue's args
    (UnknownKind, 422, "unknown_kind"),  # an enqueue of a kind nothing here knows
    (InvalidOption, 400, "invalid_request"),  # an actor or reason that cannot be kept
    (CallbackNotFound, 404, "callback_not_found"),
    (JobNotFound, 404, "job_not_found"),
    (ScheduleNotFound, 404, "schedule_not_found"),
    (StaleAttempt, 409, "stale_attempt"),
    (InvalidJobState, 409, "invalid_state"),
    (ReadOnlyError, 403, "read_only"),
    (ConnectionFailed, 503, "database_unavailable"),
    (OperationTimeout, 503, "database_timeout"),
    (SchemaNotMigrated, 500, "schema_not_migrated"),
    (PermissionDenied, 500, "permission_denied"),  # the server's role, not the caller's
    (AwaError, 500, "engine_error"),
)

# Statuses the framework itself raises (an unparsable body, unknown path, wrong method).
HTTP_CODES = {
    400: ("invalid_request", "The request body could not be read as JSON."),
    404: ("not_found", "No such endpoint; /openapi.json lists them."),
    405: ("method_not_allowed", "This endpoint does not take that method."),
}


class ApiError(Exception):
    """An HTTP-layer refusal (no token, read-only mode) raised from a dependency."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> Response:
    body = orjson.dumps({"error": code, "message": message, **extra})
    return Response(body, status, headers=headers, media_type="application/json")


def engine_error_response(exc: AwaError) -> Response:
    """The response for an engine error (``ENGINE_ERRORS`` says which status)."""
    status, code = next((s, c) for cls, s, c in ENGINE_ERRORS if isinstance(exc, cls))
    if isinstance(exc, OutputError):
        return error_response(status, code, exc.message, reason=exc.reason, path=exc.path)
    if isinstance(exc, ArgsValidationError) and exc.path is not None:
        return error_response(status, code, exc.message, path=exc.path)
    headers = {"Retry-After": "5"} if status == 503 else None
    return error_response(status, code, exc.message, headers)


def internal_error_response(exc: BaseException) -> Response:
    """A bug: logged by type and place only (its message could carry a value), answered 500."""
    log.error("internal error: %s", unexpected_summary(exc))
    return error_response(500, "internal", "The server hit an internal error; see its log.")


def _validation_text(exc: RequestValidationError) -> str:
    """``body.timeout_seconds: Input should be greater than 0``: where and why, never the
    value (pydantic's ``input`` is left out)."""
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()))
        if error.get("type") == "json_invalid":
            return "The request body is not valid JSON."
        if where == "body" and error.get("type") in ("model_attributes_type", "dict_type"):
            return "The request body must be a JSON object (Content-Type: application/json)."
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "The request is not valid."


def install(app: FastAPI) -> None:
    """Route every error the app can raise through the functions above."""

    async def on_engine_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AwaError)
        return engine_error_response(exc)

    async def on_api_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def on_invalid_request(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, "invalid_request", _validation_text(exc))

    async def on_http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code, message = HTTP_CODES.get(exc.status_code, ("http_error", str(exc.detail)))
        return error_response(exc.status_code, code, message, exc.headers)

    async def on_unexpected(_request: Request, exc: Exception) -> Response:
        return internal_error_response(exc)

    app.add_exception_handler(Exception, on_unexpected)
    app.add_exception_handler(AwaError, on_engine_error)
    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_invalid_request)
    app.add_exception_handler(HTTPException, on_http_error)
