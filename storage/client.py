"""The public entry point: a pool, registered tasks, inserts, reads, callbacks and the runtime."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

import asyncpg
import orjson

from storage import callbacks, periodic, reads, unique
from storage.batcher import CompletionBatcher
from storage.callbacks import ExternalCompletion
from storage.codec import JsonConversionError, JsonDecodeMismatch, decode_value, to_json_text
from storage.db import acquire, create_pool, translate_errors
from storage.enqueue import KeyedJob, NewJob, insert_jobs, key_of
from storage.errors import (
    ArgsValidationError,
    AwaError,
    DatabaseError,
    InvalidOption,
    ReadOnlyError,
    SchemaNotMigrated,
    StaleAttempt,
    StartFailed,
    UnknownKind,
)
from storage.events import EventBus, JobEvent, Listener
from storage.finalize import AttemptRef, Outcome
from storage.health import STOPPED, Health
from storage.job import Job
from storage.maintenance import MaintenanceSettings
from storage.metrics import OutputMetrics
from storage.migrator import LATEST_VERSION
from storage.models import JobKindDescriptor, JobRow, JobState
from storage.names import channel, check_stored_name
from storage.notices import NoticeListener
from storage.operations import Operations
from storage.payload import build_payload
from storage.results import CallbackToken
from storage.runtime import Runtime
from storage.schema_probe import OutputColumnsProbe
from storage.supervise import describe, is_transient
from storage.transitions import Ended
from storage.typed_output import declared_output

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
log = logging.getLogger("storage")

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
KIND_KNOWN = "SELECT EXISTS (SELECT 1 FROM awa.job_kind_descriptors WHERE kind = $1)"
SCHEMA_READY = "SELECT to_regclass(current_schema() || '.ready_entries') IS NOT NULL"
SET_QUEUE = """
INSERT INTO queue_settings (queue, dlq_enabled) VALUES ($1, $2)
ON CONFLICT (queue) DO UPDATE SET dlq_enabled = excluded.dlq_enabled
"""


def kind_of(args_type: type) -> str:
    """``SyncInventory`` -> ``sync_inventory``."""
    return _CAMEL.sub("_", args_type.__name__).lower()


@dataclass(frozen=True)
class TaskSpec:
    kind: str
    handler: Callable[[Job[Any]], Awaitable[Any]]
    args_type: type | None
    output_type: type | None
    queue: str

    @property
    def args_type_name(self) -> str:
        return self.args_type.__name__ if self.args_type is not None else "dict"


@dataclass(frozen=True)
class CompletedSpec:
    build: Callable[[JobRow], Any]
    options: dict[str, Any]


class Client(Operations):
    """A connection pool plus everything that runs jobs on it. Use ``await Client.connect(...)``."""

    def __init__(self, pool: asyncpg.Pool, schema: str, dsn: str | None, read_only: bool) -> None:
        self.pool = pool
        self.schema = schema
        self.dsn = dsn
        self.read_only = read_only
        self.metrics = OutputMetrics()
        self.events = EventBus()
        self._tasks: dict[str, TaskSpec] = {}
        self._descriptors: dict[str, JobKindDescriptor] = {}
        self._completed_specs: dict[str, list[CompletedSpec]] = {}
        self._schedules: dict[str, periodic.Declared] = {}
        self._probe = OutputColumnsProbe()
        self.batcher = CompletionBatcher(pool, self.outputs_supported)
        self._runtime: Runtime | None = None
        self.notices = NoticeListener(
            pool,
            {
                self._channel("callback"): self._on_callback_notice,
                self._channel("cancel"): self._on_cancel_notice,
            },
            self._on_listener_lost,
        )
        self._callback_waiters: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        dsn: str | None,
        schema: str = "awa",
        *,
        read_only: bool = False,
        max_connections: int = 10,
        command_timeout: float | None = 60,
    ) -> Self:
        """Open a pool on ``schema`` and check that the schema is migrated.

        A statement running longer than ``command_timeout`` seconds is cancelled and raises
        ``OperationTimeout`` naming the call (None: no limit).
        """
        pool = await create_pool(
            dsn,
            schema,
            max_size=max_connections,
            read_only=read_only,
            command_timeout=command_timeout,
        )
        client = cls(pool, schema, dsn, read_only)
        client._loop = asyncio.get_running_loop()
        try:
            async with acquire(pool, dsn, "connect") as conn:
                if not await conn.fetchval(SCHEMA_READY):
                    raise SchemaNotMigrated(
                        f"Schema {schema!r} has no queue storage; run `awa-tui migrate` "
                        f"(migrations up to v{LATEST_VERSION:03d})."
                    )
                await client._probe.present(conn)
        except BaseException:
            await pool.close()
            raise
        return client

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.shutdown()
        await self.pool.close()

    # -- tasks --------------------------------------------------------------------------------
    def task(
        self,
        args_type: type | None = None,
        *,
        kind: str | None = None,
        output: type | None = None,
        queue: str = "default",
    ) -> Callable[[F], F]:
        """Register the decorated coroutine as the handler of a kind (from ``args_type``)."""
        if kind is None:
            if args_type is None:
                raise AwaError("A task needs an args type or an explicit kind.")
            kind = kind_of(args_type)
        resolved_kind = check_stored_name(kind, "Kind")
        check_stored_name(queue, "Queue")

        def decorate(handler: F) -> F:
            self._tasks[resolved_kind] = TaskSpec(resolved_kind, handler, args_type, output, queue)
            return handler

        return decorate

    def on_completed(
        self, kind: str, build: Callable[[JobRow], Any], **insert_options: Any
    ) -> None:
        """Enqueue follow-ups when a job of ``kind`` completes, in its completion transaction.

        ``build`` receives the completed row with ``output`` cleared (no spec can derive a
        follow-up from an output) and returns args, a list of args, or None. Jobs of a kind
        with specs complete on the general path.
        """
        self._completed_specs.setdefault(kind, []).append(CompletedSpec(build, insert_options))

    def completed_follow_ups(self, row: JobRow) -> list[NewJob]:
        """The follow-ups registered specs build for ``row`` (its output is never passed)."""
        row = row.model_copy(update={"output_text": None, "has_output": False})
        jobs: list[NewJob] = []
        for spec in self._completed_specs.get(row.kind, []):
            built = spec.build(row)
            for args in built if isinstance(built, list) else [] if built is None else [built]:
                jobs.append(self.build_job(args, spec.options))
        return jobs

    def has_completed_specs(self, kind: str) -> bool:
        return bool(self._completed_specs.get(kind))

    def _local_output_model(self, kind: str) -> type | None:
        """The output model this client registered for ``kind``; see ``storage.typed_output``."""
        spec = self._tasks.get(kind)
        return spec.output_type if spec is not None else None

    def task_spec(self, kind: str) -> TaskSpec | None:
        return self._tasks.get(kind)

    @property
    def tasks(self) -> dict[str, TaskSpec]:
        return dict(self._tasks)

    # -- inserting ----------------------------------------------------------------------------
    def build_job(self, args: Any, options: dict[str, Any]) -> NewJob:
        """Validate and serialize one job (also used by ``Job.stage``)."""
        options = dict(options)
        kind = options.pop("kind", None)
        queue = options.pop("queue", None)
        priority = options.pop("priority", 2)
        max_attempts = options.pop("max_attempts", 25)
        run_at = options.pop("run_at", None)
        tags = options.pop("tags", ())
        metadata = options.pop("metadata", None)
        unique_key = options.pop("unique_key", None)
        if callable(unique_key):  # insert_many: a key per row, computed from its args
            unique_key = unique_key(args)
        states = options.pop("unique_states", None)
        if options:
            raise AwaError(f"Unknown insert option(s): {', '.join(sorted(options))}.")
        if kind is None:
            if isinstance(args, dict):
                raise UnknownKind("A job given as a dict needs kind=...")
            kind = kind_of(type(args))
        check_stored_name(kind, "Kind")
        if queue is not None:
            check_stored_name(queue, "Queue")
        spec = self._tasks.get(kind)
        if spec is not None and spec.args_type is not None and not isinstance(args, spec.args_type):
            try:
                decode_value(args, spec.args_type)
            except (JsonDecodeMismatch, TypeError) as exc:
                raise ArgsValidationError(
                    f"Args for kind {kind!r} do not match {spec.args_type_name}: {exc}"
                ) from exc
        if not 1 <= priority <= 4:
            raise AwaError(f"Priority must be between 1 (highest) and 4, not {priority}.")
        if max_attempts < 1:
            raise AwaError(f"max_attempts must be at least 1, not {max_attempts}.")
        if unique_key is not None:
            check_stored_name(unique_key, "Unique key")
        elif states is not None:
            raise InvalidOption("unique_states= needs a unique_key=; nothing was inserted.")
        try:
            args_json = to_json_text(args)
        except JsonConversionError as exc:
            raise ArgsValidationError(f"Args for kind {kind!r} cannot be stored: {exc}") from exc
        job = (
            kind,
            queue or (spec.queue if spec else "default"),
            args_json,
            priority,
            max_attempts,
            run_at,
            build_payload(metadata=metadata, tags=tuple(tags)),
        )
        if unique_key is None:
            return NewJob(*job)
        return KeyedJob(*job, unique_key, unique.resolve_states(states))

    async def insert(self, args: Any, **options: Any) -> JobRow:
        """Insert one job; returns it as stored (``available`` or ``scheduled``).

        With ``unique_key=...``, a job of the same kind that holds the key (it is in one of its
        ``unique_states``, default the unfinished ones) is returned instead, with
        ``duplicate=True``, and nothing is written (see ``storage.unique``).
        """
        (row,) = await self.insert_many([args], **options)
        return row

    async def insert_many(self, args_list: Iterable[Any], **options: Any) -> list[JobRow]:
        """Insert many jobs with the same options in one transaction.

        ``unique_key`` may be a function of the args (a key per row); each row follows the
        rule of ``insert``.
        """
        jobs = [self.build_job(args, options) for args in args_list]
        if not jobs:
            return []
        async with self._connection("insert_many") as conn:
            for kind in {job.kind for job in jobs} - self._tasks.keys():
                if not await conn.fetchval(KIND_KNOWN, kind):
                    raise UnknownKind(
                        f"No handler or descriptor is known for kind {kind!r}; "
                        "nothing was inserted."
                    )
            inserted = await insert_jobs(conn, jobs, now=datetime.now(UTC))
            holders = await unique.read_holders(conn, inserted, self._probe.present)
        if self._runtime is not None:
            self._runtime.wake()
        return [
            holders[ins.job_id]
            if ins.duplicate
            else JobRow(
                id=ins.job_id,
                kind=job.kind,
                queue=job.queue,
                state=JobState.SCHEDULED if ins.scheduled else JobState.AVAILABLE,
                args=orjson.loads(job.args_json),
                priority=job.priority,
                attempt=0,
                max_attempts=job.max_attempts,
                run_lease=1,
                run_at=ins.run_at,
                created_at=ins.created_at,
                tags=list((job.payload or {}).get("tags") or []),
                metadata=dict((job.payload or {}).get("metadata") or {}),
                unique_key=key_of(job),
            )
            for job, ins in zip(jobs, inserted, strict=True)
        ]

    def periodic(
        self,
        args: Any,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        name: str | None = None,
        timezone: str | None = None,
        **options: Any,
    ) -> None:
        """Declare a periodic job (``cron`` in ``timezone``, or ``every``); ``start()`` stores
        it and the maintenance leader enqueues each tick once (see ``storage.periodic``).
        ``name`` defaults to the kind; ``options`` are insert options (queue, priority, ...)."""
        job, when = self.build_job(args, options), periodic.cadence(cron, every, timezone)
        self._schedules[name or job.kind] = periodic.declare(name or job.kind, job, when)

    async def store_schedules(self) -> None:
        """Store this client's declared schedules (``start()`` does it)."""
        if not self._schedules:
            return
        async with self._connection("store_schedules") as conn:
            await periodic.store(conn, list(self._schedules.values()), datetime.now(UTC))

    async def configure_queue(self, queue: str, *, dlq: bool) -> None:
        """Turn the dead-letter queue on or off for ``queue``."""
        check_stored_name(queue, "Queue")
        async with self._connection("configure_queue") as conn:
            await conn.execute(SET_QUEUE, queue, dlq)

    # -- reads --------------------------------------------------------------------------------
    async def outputs_supported(self) -> bool:
        """Whether this schema has the output columns (binary-first probe, cached)."""
        if self._probe.cached:
            return True
        async with self._connection("outputs_supported") as conn:
            return await self._probe.present(conn)

    async def get_job(self, job_id: int) -> JobRow | None:
        """The job, carrying its kind's declared output type so ``output_as`` can check it."""
        async with self._connection("get_job") as conn:
            row = await reads.get_job(conn, job_id, outputs=await self._probe.present(conn))
            if row is None:
                return None
            row = await unique.with_key_states(conn, row)
            declared = await declared_output(conn, row.kind, self._local_output_model)
        return row.model_copy(update={"declared_output_type": declared.type_name})

    # -- callbacks ----------------------------------------------------------------------------
    async def register_callback(self, job: Job[Any], timeout_seconds: float) -> CallbackToken:
        ref = self._attempt_ref(job)
        async with self._connection("register_callback") as conn:
            callback_id = await callbacks.register(conn, ref, timeout_seconds)
        if callback_id is None:
            raise StaleAttempt(f"Job {job.id}'s attempt has already ended.")
        if self._runtime is not None:
            self._runtime.stated.add(ref.key)
        return CallbackToken(callback_id, job.id, job.run_lease)

    async def wait_for_callback(self, job: Job[Any], token: CallbackToken) -> Any:
        event = self._callback_waiters.setdefault(token.callback_id, asyncio.Event())
        # Shown as waiting first; then LISTEN before the first poll, so an answer that lands
        # after that poll is heard (one that lands before it is read by the poll).
        async with self._connection("wait_for_callback") as conn:
            await conn.execute(callbacks.MARK_WAITING, token.callback_id)
        await self.ensure_listener()
        try:
            while True:
                async with self._connection("wait_for_callback") as conn:
                    row = await conn.fetchrow(callbacks.POLL, token.callback_id)
                    if row is None:
                        raise StaleAttempt(f"Job {job.id} was resolved externally while waiting.")
                    if row["callback_resolved"]:
                        await conn.execute(callbacks.CONSUME, token.callback_id)
                        return row["callback_result"]
                event.clear()
                try:
                    await asyncio.wait_for(event.wait(), 1.0)
                except TimeoutError:
                    continue  # re-check: a notification can be lost with its connection
        finally:
            self._callback_waiters.pop(token.callback_id, None)

    async def complete_external(
        self,
        callback_id: str,
        payload: Any = None,
        *,
        output: Any = None,
        run_lease: int | None = None,
    ) -> JobRow:
        """Complete a waiting job. The payload is not stored; ``output`` is, after validation."""
        del payload  # accepted for compatibility with callers that send one; never stored
        return await self.complete_external_with(
            callback_id, ExternalCompletion(output=output, run_lease=run_lease)
        )

    async def complete_external_with(self, callback_id: str, opts: ExternalCompletion) -> JobRow:
        opts.precheck()  # fail before touching the database
        async with self._connection("complete_external") as conn:
            supported = await self._probe.present(conn)
            job_id, stored, dropped = await callbacks.complete_external(
                conn,
                callback_id,
                opts,
                outputs_supported=supported,
                local_models=self._local_output_model,
            )
            row = await reads.get_job(conn, job_id, outputs=supported)
        if dropped:
            self.metrics.dropped(
                row.kind if row else "unknown", row.queue if row else "", "schema_missing"
            )
        assert row is not None
        self.emit(
            JobEvent("completed", row.id, row.kind, row.queue, row.output if stored else None)
        )
        return row

    def complete_external_sync(
        self,
        callback_id: str,
        payload: Any = None,
        *,
        output: Any = None,
        run_lease: int | None = None,
    ) -> JobRow:
        """``complete_external`` for synchronous code running outside the client's event loop."""
        loop = self._loop
        if loop is None or not loop.is_running():
            raise AwaError("complete_external_sync needs the client's event loop to be running.")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise AwaError(
                "complete_external_sync was called on the client's own event loop; "
                "await complete_external instead."
            )
        future = asyncio.run_coroutine_threadsafe(
            self.complete_external(callback_id, payload, output=output, run_lease=run_lease), loop
        )
        return future.result()

    async def fail_external(
        self, callback_id: str, error: str, *, run_lease: int | None = None
    ) -> JobRow | None:
        async with self._connection("fail_external") as conn:
            job_id = await callbacks.fail_external(conn, callback_id, error, run_lease=run_lease)
            row = await reads.get_job(conn, job_id, outputs=await self._probe.present(conn))
        if row is not None:  # committed: the job failed for good
            self.emit(JobEvent("exhausted", row.id, row.kind, row.queue))
        return row

    async def retry_external(
        self, callback_id: str, *, run_lease: int | None = None
    ) -> JobRow | None:
        async with self._connection("retry_external") as conn:
            job_id = await callbacks.retry_external(conn, callback_id, run_lease=run_lease)
            row = await reads.get_job(conn, job_id, outputs=await self._probe.present(conn))
        if row is not None:  # committed: the job runs again
            self.emit(JobEvent("retried", row.id, row.kind, row.queue))
        return row

    async def heartbeat_callback(self, callback_id: str, timeout_seconds: float = 3600) -> None:
        async with self._connection("heartbeat_callback") as conn:
            await callbacks.heartbeat(conn, callback_id, timeout_seconds)

    async def resolve_callback(self, callback_id: str, payload: Any = None) -> None:
        """Answer a handler waiting in ``wait_for_callback``; it resumes with ``payload``."""
        async with self._connection("resolve_callback") as conn:
            await callbacks.resolve(conn, callback_id, payload)

    # -- runtime ------------------------------------------------------------------------------
    async def start(
        self,
        queues: Sequence[str] | None = None,
        *,
        concurrency: int = 64,
        claim_size: int = 256,
        claim_threshold: int | None = None,
        poll_interval: float = 0.05,
        heartbeat_interval: float = 10.0,
        deadline_seconds: float = 1800.0,
        maintenance: MaintenanceSettings | None = None,
        maintenance_interval: float | None = 1.0,
        give_up_after: float | None = None,
    ) -> None:
        """Start running jobs from ``queues`` (default: the registered tasks' queues).

        A start that fails raises and leaves the client as it was: ``start()`` may be called
        again. ``give_up_after``: seconds a background loop may keep failing on connection
        errors before the runtime fails (default: retry for as long as it takes).
        """
        if self._runtime is not None:
            if (reason := self._runtime.failed) is not None:
                raise AwaError(
                    f"This client's runtime failed ({reason}); call shutdown() before starting "
                    "it again."
                )
            raise AwaError("This client is already running.")
        chosen = (
            [check_stored_name(q, "Queue") for q in queues]
            if queues is not None
            else sorted({s.queue for s in self._tasks.values()})
        )
        runtime = Runtime(
            self,
            chosen or ["default"],
            concurrency=concurrency,
            claim_size=claim_size,
            claim_threshold=claim_threshold,
            poll_interval=poll_interval,
            heartbeat_interval=heartbeat_interval,
            deadline_seconds=deadline_seconds,
            maintenance=maintenance or MaintenanceSettings(),
            maintenance_interval=maintenance_interval,
            give_up_after=give_up_after,
        )
        listening, step = self.notices.active, "record its task descriptors"
        try:
            await self.sync_descriptors()
            step = "store its periodic schedules"
            await self.store_schedules()
            step = "listen for cancellations"
            await self.ensure_listener()
        except BaseException as exc:
            if not listening:
                await self.notices.close()
            error = _start_error(exc, step)
            if error is exc:
                raise
            raise error from exc
        self._runtime = runtime
        runtime.start()

    @property
    def health(self) -> Health:
        """The runtime's health: stopped, running, degraded (since, why) or failed (why)."""
        return self._runtime.health if self._runtime is not None else STOPPED

    async def shutdown(self, *, abandon: bool = False) -> None:
        """Stop the runtime, letting running handlers finish (or abandoning them)."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await runtime.stop(abandon=abandon)
        await self.batcher.drain()
        await self.notices.close()

    async def run_until_idle(self, queues: Sequence[str] | None = None, **options: Any) -> None:
        """Run workers until no available or running job is left in the queues (tests, demos).

        With maintenance on (the default), a job already due but not yet promoted, such as a
        rescued attempt retried at once, counts as available. Raises ``RuntimeFailed`` when the
        runtime fails instead of waiting for it forever.
        """
        started_here = self._runtime is None
        if started_here:
            await self.start(queues, **options)
        runtime = self._runtime
        assert runtime is not None
        try:
            while True:
                runtime.raise_if_failed()
                try:
                    if await runtime.idle():
                        break
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    log.warning("idle check failed (%s); waiting for the runtime", describe(exc))
                await runtime.wait_quiet()
        finally:
            if started_here:
                await self.shutdown()

    # -- runtime hooks ------------------------------------------------------------------------
    def has_attempt_state(self, ref: AttemptRef) -> bool:
        return self._runtime is not None and self._runtime.has_state(ref)

    def on_event(self, listener: Listener, kinds: Collection[str] | None = None) -> None:
        """Call ``listener`` after each lifecycle transition commits (in process, best effort)."""
        self.events.subscribe(listener, kinds)

    def emit(self, event: JobEvent) -> None:
        self.events.emit(event)

    def emit_ended(self, claimed: Any, ended: Ended, output_text: str | None) -> None:
        if ended.outcome is not Outcome.WRITTEN or ended.state is None:
            return
        if not self.events.wants(claimed.kind):
            return  # no listener: do not decode the output for nobody
        name = {
            JobState.COMPLETED: "completed",
            JobState.RETRYABLE: "retried",
            JobState.FAILED: "exhausted",
            JobState.CANCELLED: "cancelled",
            JobState.WAITING_EXTERNAL: "waiting_for_callback",
            JobState.SCHEDULED: "snoozed",
        }.get(ended.state)
        if name is not None:
            output = orjson.loads(output_text) if output_text is not None else None
            self.emit(JobEvent(name, claimed.job_id, claimed.kind, claimed.queue, output))

    def _attempt_ref(self, job: Job[Any]) -> AttemptRef:
        claim_id = job._claim_id
        if claim_id is None:
            raise StaleAttempt(f"Job {job.id} is not running in this client.")
        return AttemptRef(job.id, job.run_lease, claim_id)

    def _channel(self, name: str) -> str:
        return channel(name, self.schema)

    async def ensure_listener(self) -> None:
        """LISTEN for cancellations and callback answers; re-established after a lost connection."""
        with translate_errors(self.dsn, "listen"):
            await self.notices.ensure()

    def _on_listener_lost(self) -> None:
        for event in self._callback_waiters.values():
            event.set()  # waiters re-check the database themselves

    def _on_callback_notice(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        event = self._callback_waiters.get(str(payload))
        if event is not None:
            event.set()

    def _on_cancel_notice(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        job_id, _, run_lease = str(payload).partition(":")
        if self._runtime is not None and run_lease:
            self._runtime.cancel_attempt(int(job_id), int(run_lease))


def _start_error(exc: BaseException, step: str) -> BaseException:
    """Why a start failed, as an engine error; nothing was left running."""
    if isinstance(exc, ReadOnlyError):
        return ReadOnlyError(
            "The database session is read-only (a read-only client or a replica), so this "
            "client cannot run jobs; nothing was started."
        )
    if isinstance(exc, DatabaseError):  # the server refused the step: say which, and its cause
        exc = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
    elif isinstance(exc, AwaError) or not isinstance(exc, Exception):
        return exc
    return StartFailed(
        f"The runtime could not {step} ({describe(exc)}), so nothing was started; for the "
        "descriptors, a kind name the database refuses (such as one with a NUL character) or "
        "an output schema too large for the descriptor column causes this."
    )
