"""The one table from engine errors to HTTP answers: every class's status and code, the
output error's reason and path, Retry-After on 503."""

from __future__ import annotations

import orjson
import pytest

from awa_tui.http.errors import engine_error_response
from storage import (
    AwaError,
    CallbackNotFound,
    ConnectionFailed,
    InvalidFilter,
    InvalidJobState,
    InvalidName,
    JobNotFound,
    OperationTimeout,
    OutputError,
    PermissionDenied,
    ReadOnlyError,
    ScheduleNotFound,
    SchemaNotMigrated,
    StaleAttempt,
    UnstorableText,
)


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (InvalidFilter(), 400, "invalid_filter"),
        (InvalidName(), 400, "invalid_request"),
        (UnstorableText(), 400, "invalid_request"),
        (CallbackNotFound(), 404, "callback_not_found"),
        (JobNotFound(), 404, "job_not_found"),
        (ScheduleNotFound(), 404, "schedule_not_found"),
        (StaleAttempt(), 409, "stale_attempt"),
        (InvalidJobState(7, "completed", "cancelled", "running"), 409, "invalid_state"),
        (ReadOnlyError(), 403, "read_only"),
        (ConnectionFailed(), 503, "database_unavailable"),
        (OperationTimeout("get_job"), 503, "database_timeout"),
        (SchemaNotMigrated(), 500, "schema_not_migrated"),
        (PermissionDenied(), 500, "permission_denied"),
        (AwaError(), 500, "engine_error"),
    ],
)
def test_each_engine_error_has_its_status_and_code(error: AwaError, status: int, code: str) -> None:
    response = engine_error_response(error)
    assert response.status_code == status
    assert orjson.loads(bytes(response.body)) == {"error": code, "message": error.message}
    assert ("retry-after" in response.headers) is (status == 503)


def test_an_output_error_carries_its_reason_and_path() -> None:
    error = OutputError("invalid", "output is invalid at $.a: NaN", path="$.a")
    response = engine_error_response(error)
    assert response.status_code == 400
    assert orjson.loads(bytes(response.body)) == {
        "error": "invalid_output",
        "message": "output is invalid at $.a: NaN",
        "reason": "invalid",
        "path": "$.a",
    }
