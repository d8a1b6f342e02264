"""The one error hierarchy of the engine.

Every class's docstring is its default message. Driver errors are translated once, at the
boundary (``storage.db.pool``), with ``raise ... from exc``. No message ever contains an output
value.
"""

from __future__ import annotations

from typing import Literal


class AwaError(Exception):
    """The job queue reported an error."""

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (type(self).__doc__ or type(self).__name__).strip()
        super().__init__(self.message)


def describe(exc: BaseException) -> str:
    """The error class and SQLSTATE: what happened, without the data a message can quote."""
    # A translated engine error carries the driver's SQLSTATE on its cause.
    code = getattr(exc, "sqlstate", None) or getattr(exc.__cause__, "sqlstate", None)
    name = type(exc).__name__
    return f"{name} (SQLSTATE {code})" if isinstance(code, str) else name


class TerminalError(AwaError):
    """The handler failed in a way that retrying cannot fix; the job fails without retrying."""


OutputErrorReason = Literal["invalid", "too_large", "sealed", "wrong_type"]
"""Why an output was refused: not JSON, over the size limit, recorded after the attempt's slot
was sealed, or not the kind's declared type."""


class OutputError(TerminalError):
    """The output could not be recorded; ``reason`` says why (``OutputErrorReason``)."""

    def __init__(
        self,
        reason: OutputErrorReason,
        message: str,
        *,
        size_bytes: int | None = None,
        limit_bytes: int | None = None,
        path: str | None = None,
        rule: str | None = None,
    ) -> None:
        self.reason: OutputErrorReason = reason
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        self.path = path
        self.rule = rule  # what failed at ``path``, in the schema's or the type's words
        super().__init__(message)


class OutputDecodeError(AwaError):
    """The stored output does not fit the requested type."""


class ConfigError(AwaError):
    """The connection settings are not usable."""


class InvalidName(ConfigError):
    """The name is not allowed (see ``storage.values.names`` for the rule)."""


class ConnectionFailed(AwaError):
    """The database could not be reached."""


class OperationTimeout(AwaError):
    """The database did not finish the operation in time, so it was cancelled."""

    def __init__(self, operation: str, message: str | None = None) -> None:
        self.operation = operation
        super().__init__(message)


class PermissionDenied(AwaError):
    """The database role lacks a privilege this operation needs."""


class DatabaseError(AwaError):
    """PostgreSQL refused the operation."""


class SchemaNotMigrated(AwaError):
    """The database has not been migrated; run `awa-tui migrate --dsn ...` first."""


class ForeignSchema(AwaError):
    """This database was not made by awa-tui; awa-tui reads only databases it migrated.

    ``found`` says what is there instead: ``"awa"`` (Awa's own schema, at ``version``),
    ``"newer"`` (a ledger from a newer awa-tui, at ``version``), ``"unknown"`` (a ledger naming
    migrations this release does not ship) or ``"other"`` (tables in ``awa`` and no ledger).
    Unlike ``SchemaNotMigrated`` it is not fixed by ``awa-tui migrate``, which refuses it too.
    """

    def __init__(self, found: str, message: str, *, version: int | None = None) -> None:
        self.found = found
        self.version = version
        super().__init__(message)


class ReadOnlyError(AwaError):
    """This session is read-only, so it cannot change jobs."""


class ArgsValidationError(AwaError):
    """The job arguments do not match the declared type."""

    def __init__(
        self, message: str | None = None, *, path: str | None = None, rule: str | None = None
    ) -> None:
        self.path = path  # the first failing JSON position and its rule, when known
        self.rule = rule
        super().__init__(message)


class UnknownKind(AwaError):
    """No handler is registered for this job kind."""


class JobNotFound(AwaError):
    """No job has this id (it may have been deleted or pruned)."""


class CallbackNotFound(AwaError):
    """No job is waiting for this callback id (it is unknown or already resolved)."""


class ScheduleNotFound(AwaError):
    """No stored periodic schedule has this name."""


class InvalidJobState(AwaError):
    """The job is not in a state this action applies to."""

    def __init__(self, job_id: int, state: str, action: str, allowed: str) -> None:
        self.job_id = job_id
        self.state = state
        super().__init__(f"Job {job_id} is {state}, so it cannot be {action} (only {allowed}).")


class UnstorableText(AwaError):
    """The text cannot be stored: PostgreSQL text holds no NUL character or lone surrogate."""


class StaleAttempt(AwaError):
    """The attempt was already resolved elsewhere (rescued, cancelled, or completed first)."""


class StageError(AwaError):
    """A staged follow-up could not be inserted."""


class InvalidFilter(AwaError):
    """The filter is not valid (an unknown state, or text PostgreSQL cannot store)."""


class StartFailed(AwaError):
    """The runtime could not start; nothing is running and ``start()`` may be called again."""


class RuntimeFailed(AwaError):
    """The worker runtime stopped: one of its loops could not recover (see ``client.health``)."""


class InvalidOption(AwaError):
    """An insert or schedule option is not valid; nothing was written."""


class InvalidSchedule(InvalidOption):
    """The periodic schedule is not valid (its cron expression, interval, or timezone)."""


class UniqueConflict(AwaError):
    """Another job of this kind holds the unique key, so this job cannot hold it too."""
