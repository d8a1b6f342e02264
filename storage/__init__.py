"""Awa-style Postgres queue storage with retained job output (ADR-048).

The public API; everything else in this package is internal.
"""

from __future__ import annotations

from storage.callbacks import ExternalCompletion
from storage.client import Client, TaskSpec, kind_of
from storage.errors import (
    ArgsValidationError,
    AwaError,
    CallbackNotFound,
    ConfigError,
    ConnectionFailed,
    DatabaseError,
    InvalidFilter,
    InvalidJobState,
    InvalidName,
    JobNotFound,
    OperationTimeout,
    OutputError,
    PermissionDenied,
    ReadOnlyError,
    RuntimeFailed,
    SchemaNotMigrated,
    StageError,
    StaleAttempt,
    StartFailed,
    TerminalError,
    UnknownKind,
)
from storage.events import JobEvent
from storage.health import Health, HealthState
from storage.job import Job
from storage.migrate import migrate
from storage.models import (
    DlqInfo,
    JobKindDescriptor,
    JobPage,
    JobRow,
    JobState,
    KindSummary,
    StateCounts,
)
from storage.output import MAX_OUTPUT_BYTES, OutputSlot, encode_output
from storage.redact import redact_dsn, redact_secrets
from storage.results import CallbackToken, Cancel, RetryAfter, Snooze, WaitForCallback
from storage.schema import Violation, schema_violations

__all__ = [
    "MAX_OUTPUT_BYTES",
    "ArgsValidationError",
    "AwaError",
    "CallbackNotFound",
    "CallbackToken",
    "Cancel",
    "Client",
    "ConfigError",
    "ConnectionFailed",
    "DatabaseError",
    "DlqInfo",
    "ExternalCompletion",
    "Health",
    "HealthState",
    "InvalidFilter",
    "InvalidJobState",
    "InvalidName",
    "Job",
    "JobEvent",
    "JobKindDescriptor",
    "JobNotFound",
    "JobPage",
    "JobRow",
    "JobState",
    "KindSummary",
    "OperationTimeout",
    "OutputError",
    "OutputSlot",
    "PermissionDenied",
    "ReadOnlyError",
    "RetryAfter",
    "RuntimeFailed",
    "SchemaNotMigrated",
    "Snooze",
    "StageError",
    "StaleAttempt",
    "StartFailed",
    "StateCounts",
    "TaskSpec",
    "TerminalError",
    "UnknownKind",
    "Violation",
    "WaitForCallback",
    "encode_output",
    "kind_of",
    "migrate",
    "redact_dsn",
    "redact_secrets",
    "schema_violations",
]
