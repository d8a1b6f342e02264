"""Awa-style Postgres queue storage with retained job output (ADR-048).

The public API; everything else in this package is internal, and the console imports only
from here (an import-linter contract in pyproject.toml holds it to that). Besides the client,
its models and errors, a few helpers are public on purpose: ``check_schema_name`` so a caller
can refuse a schema name before it connects, ``redact_dsn``/``redact_secrets`` so a caller
can show a connection string or an error without its password, ``encode_output`` and
``schema_violations`` so a caller can check a value the way storage will before sending it,
and ``external_output_text`` (with ``Client.output_declaration``) so a form checks an output
sent from outside exactly as ``complete_external`` will.
"""

from __future__ import annotations

from storage.client import Client
from storage.db.migrator import migrate
from storage.insert.periodic import PeriodicSchedule
from storage.insert.plan import kind_of
from storage.ops.callbacks import ExternalCompletion
from storage.ops.declared_output import DeclaredOutput, external_output_text
from storage.ops.maintenance import MaintenanceSettings
from storage.read.audit import MAX_LIMIT as MAX_AUDIT_ENTRIES
from storage.read.drift import DRIFT_WINDOW, MAX_DRIFT_LISTED
from storage.read.failure_groups import FailureGroupMembers
from storage.read.group_outputs import GROUP_WINDOW, MAX_SHAPES, MAX_VALUES
from storage.read.last_output import LAST_GOOD_BOUND, LastGoodOutput
from storage.read.listing_filter import (
    FilterFields,
    ListFilter,
    OutputMatch,
    SortColumn,
    SortKey,
    SortOrder,
)
from storage.read.timeline import error_positions
from storage.runtime.job import Job
from storage.tasks import Tasks, TaskSpec
from storage.values.audit import AuditEntry, check_actor, default_actor
from storage.values.errors import (
    ArgsValidationError,
    AwaError,
    CallbackNotFound,
    ConfigError,
    ConnectionFailed,
    DatabaseError,
    ForeignSchema,
    InvalidFilter,
    InvalidJobState,
    InvalidName,
    InvalidOption,
    InvalidSchedule,
    JobNotFound,
    OperationTimeout,
    OutputDecodeError,
    OutputError,
    OutputErrorReason,
    PermissionDenied,
    ReadOnlyError,
    RuntimeFailed,
    ScheduleNotFound,
    SchemaNotMigrated,
    StageError,
    StaleAttempt,
    StartFailed,
    TerminalError,
    UniqueConflict,
    UnknownKind,
    UnstorableText,
)
from storage.values.events import EventName, JobEvent
from storage.values.health import Health, HealthState
from storage.values.json_diff import JsonChange, JsonDiff, json_diff
from storage.values.models import (
    HEARTBEAT_STALE_SECONDS,
    AttemptSpan,
    DlqInfo,
    FailureGroup,
    JobKindDescriptor,
    JobPage,
    JobRow,
    JobState,
    JobTimeline,
    KindSummary,
    QueueSummary,
    RuntimeInfo,
    SchemaSummary,
    StateCounts,
)
from storage.values.names import check_schema_name
from storage.values.output import MAX_OUTPUT_BYTES, OutputSlot, encode_output
from storage.values.provenance import Absence, JobAccount, JobFacts, NoOutput, Provenance
from storage.values.redact import redact_dsn, redact_secrets
from storage.values.results import CallbackToken, Cancel, RetryAfter, Snooze, WaitForCallback
from storage.values.schema import Violation, schema_violations
from storage.values.shapes import (
    DriftedOutput,
    FieldValue,
    GroupOutputs,
    OutputShape,
    SchemaDrift,
)

__all__ = [
    "DRIFT_WINDOW",
    "GROUP_WINDOW",
    "HEARTBEAT_STALE_SECONDS",
    "LAST_GOOD_BOUND",
    "MAX_AUDIT_ENTRIES",
    "MAX_DRIFT_LISTED",
    "MAX_OUTPUT_BYTES",
    "MAX_SHAPES",
    "MAX_VALUES",
    "Absence",
    "ArgsValidationError",
    "AttemptSpan",
    "AuditEntry",
    "AwaError",
    "CallbackNotFound",
    "CallbackToken",
    "Cancel",
    "Client",
    "ConfigError",
    "ConnectionFailed",
    "DatabaseError",
    "DeclaredOutput",
    "DlqInfo",
    "DriftedOutput",
    "EventName",
    "ExternalCompletion",
    "FailureGroup",
    "FailureGroupMembers",
    "FieldValue",
    "FilterFields",
    "ForeignSchema",
    "GroupOutputs",
    "Health",
    "HealthState",
    "InvalidFilter",
    "InvalidJobState",
    "InvalidName",
    "InvalidOption",
    "InvalidSchedule",
    "Job",
    "JobAccount",
    "JobEvent",
    "JobFacts",
    "JobKindDescriptor",
    "JobNotFound",
    "JobPage",
    "JobRow",
    "JobState",
    "JobTimeline",
    "JsonChange",
    "JsonDiff",
    "KindSummary",
    "LastGoodOutput",
    "ListFilter",
    "MaintenanceSettings",
    "NoOutput",
    "OperationTimeout",
    "OutputDecodeError",
    "OutputError",
    "OutputErrorReason",
    "OutputMatch",
    "OutputShape",
    "OutputSlot",
    "PeriodicSchedule",
    "PermissionDenied",
    "Provenance",
    "QueueSummary",
    "ReadOnlyError",
    "RetryAfter",
    "RuntimeFailed",
    "RuntimeInfo",
    "ScheduleNotFound",
    "SchemaDrift",
    "SchemaNotMigrated",
    "SchemaSummary",
    "Snooze",
    "SortColumn",
    "SortKey",
    "SortOrder",
    "StageError",
    "StaleAttempt",
    "StartFailed",
    "StateCounts",
    "TaskSpec",
    "Tasks",
    "TerminalError",
    "UniqueConflict",
    "UnknownKind",
    "UnstorableText",
    "Violation",
    "WaitForCallback",
    "check_actor",
    "check_schema_name",
    "default_actor",
    "encode_output",
    "error_positions",
    "external_output_text",
    "json_diff",
    "kind_of",
    "migrate",
    "redact_dsn",
    "redact_secrets",
    "schema_violations",
]
