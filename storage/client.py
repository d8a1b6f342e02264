"""The public entry point: a pool, registered tasks, inserts, reads, callbacks and the runtime."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload

import asyncpg
from prometheus_client import CollectorRegistry

from storage.callback_ops import CallbackOperations
from storage.db.job_metrics import JobMetrics
from storage.db.metrics import OutputMetrics
from storage.db.migrator import check_schema
from storage.db.pool import Conn, acquire, close_pool, create_pool, snapshot, translate_errors
from storage.insert import periodic, unique
from storage.insert.copy import insert_chunked, insert_keyed
from storage.insert.enqueue import NewJob
from storage.kind_ops import KindOperations
from storage.maintenance_ops import MaintenanceOperations
from storage.operations import Operations
from storage.ops.declared_output import DeclaredOutput, declaration, declared_output
from storage.ops.maintenance import MaintenanceSettings
from storage.output_reads import OutputReads
from storage.read import audit, one_job, output_facts
from storage.runtime.batcher import CompletionBatcher
from storage.runtime.notices import NoticeListener
from storage.session import Delegated, Session
from storage.tasks import Tasks, TaskSpec
from storage.values.errors import (
    AwaError,
    InvalidOption,
    UnknownKind,
    describe,
)
from storage.values.events import JobEvent, Listener
from storage.values.health import Health
from storage.values.models import JobRow
from storage.values.names import channel, check_stored_name
from storage.values.provenance import JobAccount, Retention
from storage.worker import Worker

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
log = logging.getLogger("storage")

_DEFAULTS = MaintenanceSettings()
DEFAULT_RETENTION = Retention(
    _DEFAULTS.queue_rotate_interval, _DEFAULTS.failed_retention, _DEFAULTS.dlq_retention
)
KIND_KNOWN = "SELECT EXISTS (SELECT 1 FROM awa.job_kind_descriptors WHERE kind = $1)"
SET_QUEUE = """
INSERT INTO queue_settings (queue, dlq_enabled) VALUES ($1, $2)
ON CONFLICT (queue) DO UPDATE SET dlq_enabled = excluded.dlq_enabled
"""


class Client:
    """A connection pool plus everything that runs jobs on it. Use ``await Client.connect(...)``.

    The client owns the pool and the task registry and composes its parts: ``operations``
    (operator reads and actions), ``kind_ops`` (descriptors, kinds and schedules),
    ``maintenance_ops`` (maintenance passes), ``output_reads`` (bulk reads of outputs),
    ``callback_ops`` (callbacks) and ``worker`` (the runtime), whose methods it publishes under
    their own names. The runtime sees it as a ``WorkerHost``.
    """

    CLOSE_TIMEOUT = 30.0
    """Seconds ``close`` waits for running handlers and connections by default."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: str,
        dsn: str | None,
        read_only: bool,
        tasks: Tasks | None = None,
    ) -> None:
        self.pool = pool
        self.schema = schema
        self.dsn = dsn
        self.read_only = read_only
        self.session = Session(pool, dsn)
        self.events = self.session.events
        self.job_metrics: JobMetrics = self.session.job_metrics
        """The runtime's Prometheus instruments (off until ``enable_prometheus``)."""
        self.registry = tasks if tasks is not None else Tasks()
        self._schedules: dict[str, periodic.Declared] = {}
        self.batcher = CompletionBatcher(pool, self.outputs_supported)
        self.operations = Operations(self.session, lambda: self.registry.specs)
        self.kind_ops = KindOperations(self.session, lambda: self.registry.specs)
        self.maintenance_ops = MaintenanceOperations(self.session)
        self.output_reads = OutputReads(self.session)
        self.worker = Worker(self, self.session)
        self.callback_ops = CallbackOperations(self.session, self.worker, self._local_output_model)
        self.notices = NoticeListener(
            pool,
            {
                channel("callback", schema): self.callback_ops.on_notice,
                channel("cancel", schema): self.worker.on_cancel_notice,
                channel("ready", schema): self.worker.on_ready_notice,
            },
            self.callback_ops.on_listener_lost,
        )

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
        tasks: Tasks | None = None,
    ) -> Self:
        """Open a pool on ``schema`` and check that the database is this engine's: migrated
        by awa-tui (its ledger, ``awa.schema_migrations``), at a version this release reads,
        with ``schema`` installed. Otherwise it raises ``ForeignSchema`` (another tool made the
        database, such as Awa itself, or a newer awa-tui migrated it) or ``SchemaNotMigrated``,
        each saying what it found, and nothing stays open (``storage.db.schema_check``).

        ``tasks``: a registry declared at import time (``storage.Tasks``), shared, not copied.

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
        client = cls(pool, schema, dsn, read_only, tasks)
        client.callback_ops.loop = asyncio.get_running_loop()
        try:
            async with acquire(pool, dsn, "connect") as conn:
                await check_schema(conn, schema)
                await client.session.probe.present(conn)
        except BaseException:
            pool.terminate()  # nothing runs on it yet: no need to wait for anything
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
        if exc is None:
            await self.close()
            return
        try:  # the block's own error is the one to see; a close that failed too is logged
            await self.close()
        except AwaError as failed:
            log.warning("closing the client after an error failed too (%s)", describe(failed))

    # ``timeout`` is not a bound the caller could set with asyncio.timeout: when it runs out,
    # close goes on (terminating what is left) rather than stopping half way.
    async def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:  # noqa: ASYNC109
        """Stop the runtime (running handlers finish, completions are flushed), stop listening
        and close the pool, all within ``timeout`` seconds (None: no bound). When the bound
        runs out, running handlers are abandoned (maintenance rescues their jobs) and every
        connection is terminated. However it ends, the pool is closed afterwards.

        Raises only ``AwaError`` (``ConnectionFailed`` when the database went away while
        closing), and only after everything is closed.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        bound = asyncio.timeout_at(deadline)
        with translate_errors(self.dsn, "close"):
            try:
                async with bound:
                    await self.shutdown()
            except TimeoutError:
                if not bound.expired():
                    raise
                log.warning(
                    "close: the runtime did not stop within %gs; its handlers were abandoned",
                    timeout,
                )
            finally:
                left = None if deadline is None else max(0.0, deadline - loop.time())
                if not await close_pool(self.pool, left):
                    log.warning(
                        "close: connections still in use after %gs were terminated", timeout
                    )

    # -- tasks (the registry lives in storage.tasks) ----------------------------------------
    def task(
        self,
        args_type: type | None = None,
        *,
        kind: str | None = None,
        output: type | None = None,
        queue: str = "default",
    ) -> Callable[[F], F]:
        """Register a handler in this client's registry; see ``Tasks.task``."""
        return self.registry.task(args_type, kind=kind, output=output, queue=queue)

    def on_completed(
        self, kind: str, build: Callable[[JobRow], Any], **insert_options: Any
    ) -> None:
        """Enqueue follow-ups when ``kind`` completes; see ``Tasks.on_completed``."""
        self.registry.on_completed(kind, build, **insert_options)

    def completed_follow_ups(self, row: JobRow) -> list[NewJob]:
        return self.registry.completed_follow_ups(row)

    def has_completed_specs(self, kind: str) -> bool:
        return self.registry.has_completed_specs(kind)

    def _local_output_model(self, kind: str) -> type | None:
        return self.registry.output_model(kind)

    def output_declaration(self, kind: str, published: dict[str, Any] | None) -> DeclaredOutput:
        """What ``complete_external`` checks an output of ``kind`` against, from the descriptor's
        ``output`` the caller read: this client's model when it is the declared type, else the
        schema (``storage.ops.declared_output``). Check a value with ``external_output_text``."""
        return declaration(published, self._local_output_model(kind))

    def task_spec(self, kind: str) -> TaskSpec | None:
        return self.registry.spec(kind)

    @property
    def tasks(self) -> dict[str, TaskSpec]:
        return self.registry.specs

    # -- inserting ----------------------------------------------------------------------------
    def build_job(self, args: Any, options: dict[str, Any]) -> NewJob:
        """Validate and serialize one job (also used by ``Job.stage``)."""
        return self.registry.build_job(args, options)

    async def insert(self, args: Any, **options: Any) -> JobRow:
        """Insert one job; returns it as stored (``available`` or ``scheduled``).

        With ``unique_key=...``, a job of the same kind that holds the key (it is in one of its
        ``unique_states``, default the unfinished ones) is returned instead, with
        ``duplicate=True``, and nothing is written (see ``storage.insert.unique``).
        """
        (row,) = await self.insert_many([args], returning="rows", **options)
        return row

    @overload
    async def insert_many(
        self, args_list: Iterable[Any], *, returning: Literal["rows"] = ..., **options: Any
    ) -> list[JobRow]: ...

    @overload
    async def insert_many(
        self, args_list: Iterable[Any], *, returning: Literal["ids"], **options: Any
    ) -> list[int]: ...

    async def insert_many(
        self, args_list: Iterable[Any], *, returning: str = "rows", **options: Any
    ) -> list[JobRow] | list[int]:
        """Insert many jobs with the same options in one transaction: bad input anywhere
        raises and nothing is written.

        Returns the jobs as stored, or with ``returning="ids"`` only their ids (a duplicate's
        is its holder's): a row costs about 2 KB of memory, an id a few bytes, so large
        batches that need no rows should ask for ids. Jobs are checked, encoded and written
        ``storage.insert.copy.CHUNK`` at a time; an iterator is read into a list first (its
        items, not rows). ``unique_key`` may be a function of the args (a key per row); each
        row follows the rule of ``insert``.
        """
        if returning not in ("rows", "ids"):
            raise InvalidOption(f'returning must be "rows" or "ids", not {returning!r}.')
        plan = self.registry.plan(options)
        args = args_list if isinstance(args_list, Sequence) else list(args_list)
        if not args:
            return []
        rows = returning == "rows"
        async with self.session.connection("insert_many") as conn:
            known = set(self.registry.specs)

            async def check_kinds(kinds: set[str]) -> None:
                for kind in kinds - known:
                    if not await conn.fetchval(KIND_KNOWN, kind):
                        raise UnknownKind(
                            f"No handler or descriptor is known for kind {kind!r}; "
                            "nothing was inserted."
                        )
                    known.add(kind)

            if plan.unique_key is None:
                async with conn.transaction():
                    written = await insert_chunked(conn, plan, args, check_kinds, rows=rows)
            else:
                outputs = self.session.probe.present
                written = await insert_keyed(conn, plan, args, check_kinds, outputs, rows=rows)
        self.worker.wake()
        return written

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
        it and the maintenance leader enqueues each tick once (see ``storage.insert.periodic``).
        ``name`` defaults to the kind; ``options`` are insert options (queue, priority, ...)."""
        job, when = self.build_job(args, options), periodic.cadence(cron, every, timezone)
        self._schedules[name or job.kind] = periodic.declare(name or job.kind, job, when)

    async def store_schedules(self) -> None:
        """Store this client's declared schedules (``start()`` does it)."""
        if not self._schedules:
            return
        async with self.session.connection("store_schedules") as conn:
            await periodic.store(conn, list(self._schedules.values()), datetime.now(UTC))

    async def configure_queue(self, queue: str, *, dlq: bool) -> None:
        """Turn the dead-letter queue on or off for ``queue``."""
        check_stored_name(queue, "Queue")
        async with self.session.connection("configure_queue") as conn:
            await conn.execute(SET_QUEUE, queue, dlq)

    # -- reads --------------------------------------------------------------------------------
    def outputs_cached(self) -> bool:
        """True once the output columns were seen (no probe, no await: checked per job)."""
        return self.session.probe.cached

    async def outputs_supported(self) -> bool:
        """Whether this schema has the output columns (binary-first probe, cached)."""
        return await self.session.outputs_supported()

    async def get_job(self, job_id: int) -> JobRow | None:
        """The job, carrying its kind's declared output type so ``output_as`` can check it."""
        async with self.session.connection("get_job") as conn:
            outputs = await self.session.probe.present(conn)
            async with snapshot(conn):  # the row, its key's states and its kind's declaration
                return await self._read_job(conn, job_id, outputs)

    async def explain_job(self, job_id: int, *, actions: int = 0) -> JobAccount:
        """``get_job`` and, from the same snapshot, what storage keeps about how its attempts
        ended: where its output came from, when it goes, or the one reason it has none
        (``storage.values.provenance``), and with ``actions`` the newest that many audit
        entries that acted on it (None on a schema without the audit trail). Prune times
        assume the default maintenance settings."""
        async with self.session.connection("explain_job") as conn:
            outputs = await self.session.probe.present(conn)
            async with snapshot(conn):
                row = await self._read_job(conn, job_id, outputs)
                facts = await output_facts.read_facts(
                    conn, job_id, outputs_supported=outputs, retention=DEFAULT_RETENTION
                )
                entries = await audit.job_actions(conn, job_id, actions) if actions else ()
        return JobAccount(job_id, row, facts, entries)

    async def _read_job(self, conn: Conn, job_id: int, outputs: bool) -> JobRow | None:
        row = await one_job.read_job(conn, job_id, outputs=outputs)
        if row is None:
            return None
        row = await unique.with_key_states(conn, row)
        declared = await declared_output(conn, row.kind, self._local_output_model)
        return row.model_copy(update={"declared_output_type": declared.type_name})

    # -- events -------------------------------------------------------------------------------
    def on_event(
        self,
        listener: Listener,
        kinds: Collection[str] | None = None,
        *,
        names: Collection[str] | None = None,
    ) -> None:
        """Call ``listener`` after each lifecycle transition commits (in process, best effort),
        for jobs of ``kinds`` and events named in ``names`` (``storage.values.events``'s
        ``EVENT_NAMES``; an unknown one raises ``InvalidOption``), or all of them."""
        self.events.subscribe(listener, kinds, names)

    def emit(self, event: JobEvent) -> None:
        self.events.emit(event)

    @property
    def metrics(self) -> OutputMetrics:
        """Output metrics; replace them to export to another meter provider."""
        return self.session.metrics

    @metrics.setter
    def metrics(self, metrics: OutputMetrics) -> None:
        self.session.metrics = metrics

    def enable_prometheus(self) -> CollectorRegistry:
        """Record claims, waits, handler durations, ends and outputs of this client's runtime
        in a Prometheus registry of their own (``storage.db.job_metrics``) and return it."""
        registry = self.session.job_metrics.enable()
        self.session.metrics.prometheus = self.session.job_metrics
        return registry

    async def check_schema(self) -> None:
        """Check the database again as ``connect`` did (reachable, awa-tui's, at a version this
        release reads, the schema installed); raises the same errors, or ``ConnectionFailed``."""
        async with self.session.connection("check_schema") as conn:
            await check_schema(conn, self.schema)

    @property
    def count_cap(self) -> int:
        """Tab counts (``counts``, ``browse``) stop at this many jobs per state."""
        return self.operations.count_cap

    @count_cap.setter
    def count_cap(self, cap: int) -> None:
        self.operations.count_cap = cap

    # -- the parts' methods, published here under their own names ------------------------------
    # Operator surface (storage.operations).
    list_jobs = Delegated("operations", Operations.list_jobs)
    browse = Delegated("operations", Operations.browse)
    counts = Delegated("operations", Operations.counts)
    count_matching = Delegated("operations", Operations.count_matching)
    bulk_action = Delegated("operations", Operations.bulk_action)
    cancel_job = Delegated("operations", Operations.cancel_job)
    retry_job = Delegated("operations", Operations.retry_job)
    enqueue_job = Delegated("operations", Operations.enqueue_job)
    check_args = Delegated("operations", Operations.check_args)
    default_queue = Delegated("operations", Operations.default_queue)
    delete_job = Delegated("operations", Operations.delete_job)
    retry_dlq = Delegated("operations", Operations.retry_dlq)
    purge_dlq = Delegated("operations", Operations.purge_dlq)
    database_read_only = Delegated("operations", Operations.database_read_only)
    pause_queue = Delegated("operations", Operations.pause_queue)
    resume_queue = Delegated("operations", Operations.resume_queue)
    list_queues = Delegated("operations", Operations.list_queues)
    list_schemas = Delegated("operations", Operations.list_schemas)
    failure_groups = Delegated("operations", Operations.failure_groups)
    failure_group_jobs = Delegated("operations", Operations.failure_group_jobs)
    attempt_timeline = Delegated("operations", Operations.attempt_timeline)
    job_timeline = Delegated("operations", Operations.job_timeline)
    list_audit = Delegated("operations", Operations.list_audit)
    # Kinds, their descriptors and periodic schedules (storage.kind_ops).
    job_kind_descriptor = Delegated("kind_ops", KindOperations.job_kind_descriptor)
    declared_descriptors = Delegated("kind_ops", KindOperations.declared_descriptors)
    sync_descriptors = Delegated("kind_ops", KindOperations.sync_descriptors)
    get_descriptor = Delegated("kind_ops", KindOperations.get_descriptor)
    list_kinds = Delegated("kind_ops", KindOperations.list_kinds)
    list_schedules = Delegated("kind_ops", KindOperations.list_schedules)
    remove_schedule = Delegated("kind_ops", KindOperations.remove_schedule)
    trigger_schedule = Delegated("kind_ops", KindOperations.trigger_schedule)
    # Maintenance (storage.maintenance_ops).
    run_maintenance = Delegated("maintenance_ops", MaintenanceOperations.run_maintenance)
    lead_maintenance = Delegated("maintenance_ops", MaintenanceOperations.lead_maintenance)
    resign_maintenance = Delegated("maintenance_ops", MaintenanceOperations.resign_maintenance)
    # Bulk output reads (storage.output_reads).
    last_good_output = Delegated("output_reads", OutputReads.last_good_output)
    failure_group_outputs = Delegated("output_reads", OutputReads.failure_group_outputs)
    schema_drift = Delegated("output_reads", OutputReads.schema_drift)
    # Callbacks (storage.callback_ops).
    register_callback = Delegated("callback_ops", CallbackOperations.register_callback)
    wait_for_callback = Delegated("callback_ops", CallbackOperations.wait_for_callback)
    complete_external = Delegated("callback_ops", CallbackOperations.complete_external)
    complete_external_with = Delegated("callback_ops", CallbackOperations.complete_external_with)
    complete_external_sync = Delegated("callback_ops", CallbackOperations.complete_external_sync)
    fail_external = Delegated("callback_ops", CallbackOperations.fail_external)
    retry_external = Delegated("callback_ops", CallbackOperations.retry_external)
    heartbeat_callback = Delegated("callback_ops", CallbackOperations.heartbeat_callback)
    resolve_callback = Delegated("callback_ops", CallbackOperations.resolve_callback)
    # The runtime (storage.worker).
    start = Delegated("worker", Worker.start)
    shutdown = Delegated("worker", Worker.shutdown)
    run_until_idle = Delegated("worker", Worker.run_until_idle)
    ensure_listener = Delegated("worker", Worker.ensure_listener)
    has_attempt_state = Delegated("worker", Worker.has_attempt_state)

    @property
    def health(self) -> Health:
        """The runtime's health: stopped, running, degraded (since, why) or failed (why)."""
        return self.worker.health
