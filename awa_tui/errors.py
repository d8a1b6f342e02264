"""The one place that turns errors into what a person reads (and the CLI's exit codes).

Messages say what happened and what to do next. Output values never appear: storage errors
name positions and types only, and anything else is reduced to its class and message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from awa_tui.resilience import unexpected_summary
from storage import (
    AwaError,
    CallbackNotFound,
    ConfigError,
    ConnectionFailed,
    ForeignSchema,
    InvalidJobState,
    JobNotFound,
    OperationTimeout,
    OutputError,
    PermissionDenied,
    ReadOnlyError,
    SchemaNotMigrated,
    StaleAttempt,
)

Severity = Literal["information", "warning", "error"]

EXIT_OK = 0
EXIT_RUNTIME_FAILED = 1  # awa-tui worker: a runtime loop gave up (see the warnings logged)
EXIT_USAGE = 2
EXIT_CONNECT = 3
EXIT_SCHEMA = 4
EXIT_PERMISSION = 5
EXIT_TIMEOUT = 6
EXIT_WORKER_DIED = 7  # awa-tui worker --processes: a worker process died without being asked
EXIT_FOREIGN = 8  # the database is not awa-tui's (Awa's own, another tool's, a newer awa-tui's)
EXIT_INTERNAL = 70  # EX_SOFTWARE: an unexpected error reached the top level (a bug)
EXIT_INTERRUPTED = 130  # SIGINT, as shells report it


@dataclass(frozen=True)
class UserMessage:
    title: str
    text: str
    severity: Severity = "error"


def describe(exc: BaseException) -> UserMessage:
    """What to tell the person about ``exc``."""
    match exc:
        case InvalidJobState():
            return UserMessage("Not allowed in this state", exc.message, "warning")
        case JobNotFound():
            return UserMessage("Job not found", exc.message, "warning")
        case ReadOnlyError():
            return UserMessage(
                "Read-only",
                "This session is read-only (--read-only or a read-only database), "
                "so nothing was changed.",
                "warning",
            )
        case StaleAttempt():
            return UserMessage("Already resolved", exc.message, "warning")
        case CallbackNotFound():
            return UserMessage("Callback not found", exc.message, "warning")
        case OutputError():
            return UserMessage("Output refused", output_error_text(exc), "error")
        case SchemaNotMigrated():
            return UserMessage("Schema not migrated", exc.message)
        case ForeignSchema():
            return UserMessage("Not an awa-tui database", exc.message)
        case ConnectionFailed():
            return UserMessage("Cannot reach the database", exc.message)
        case OperationTimeout():
            return UserMessage("Timed out", exc.message)
        case PermissionDenied():
            return UserMessage("Permission denied", exc.message)
        case ConfigError():
            return UserMessage("Configuration", exc.message)
        case AwaError():
            return UserMessage("Job queue error", exc.message)
        case OSError():
            return UserMessage("System error", f"{type(exc).__name__}: {exc}")
        case _:
            # Its message could carry args, an output or a DSN: name the type and place only.
            return UserMessage(
                "Unexpected error",
                f"{unexpected_summary(exc)}. The console keeps running; this is a bug.",
            )


def output_error_text(exc: OutputError) -> str:
    """``too_large: output is 5012 bytes ...``: the reason, the message, and the JSON path."""
    text = f"{exc.reason}: {exc.message}"
    if exc.path and exc.path not in exc.message:
        text += f" (at {exc.path})"
    return text


def exit_code(exc: BaseException) -> int:
    """The CLI's documented exit code for a fatal start-up error."""
    if isinstance(exc, SchemaNotMigrated):
        return EXIT_SCHEMA
    if isinstance(exc, ForeignSchema):
        return EXIT_FOREIGN
    if isinstance(exc, PermissionDenied):
        return EXIT_PERMISSION
    if isinstance(exc, OperationTimeout):
        return EXIT_TIMEOUT
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, ConnectionFailed | OSError):
        return EXIT_CONNECT
    return EXIT_CONNECT
