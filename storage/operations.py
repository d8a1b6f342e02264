"""The client's operator part: list reads, admin actions, queues and failure groups.

``Client`` composes it and publishes its methods under the same names (``storage.session``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Unpack

from storage.db.pool import snapshot
from storage.insert import enqueue
from storage.ops import admin, enqueue_job, job_args
from storage.ops.audit import Recorder
from storage.read import (
    audit,
    counting,
    failure_groups,
    listing,
    one_job,
    queues,
    schemas,
    timeline,
)
from storage.read.failure_groups import FailureGroupMembers
from storage.read.listing_filter import (
    FilterFields,
    ListFilter,
    SortKey,
    SortOrder,
    check_text,
    since_moment,
)
from storage.runtime.host import HandlerSpec
from storage.session import Session
from storage.values.audit import Audit, AuditEntry
from storage.values.errors import (
    AwaError,
    InvalidJobState,
    JobNotFound,
)
from storage.values.events import JobEvent
from storage.values.models import (
    AttemptSpan,
    FailureGroup,
    JobKindDescriptor,
    JobPage,
    JobRow,
    JobTimeline,
    QueueSummary,
    SchemaSummary,
    StateCounts,
)
from storage.values.names import check_stored_name

BULK_PAGE = 500


class Operations:
    """What an operator does with one client's schema; ``tasks`` gives the registered tasks
    (their args types check an operator's enqueue and edit-and-retry)."""

    def __init__(self, session: Session, tasks: Callable[[], Mapping[str, HandlerSpec]]) -> None:
        self._session = session
        self._tasks = tasks
        self.count_cap = counting.COUNT_CAP
        """Tab counts (``counts``, ``browse``) stop at this many jobs per state."""
        self._actions: dict[str, Callable[[int, Recorder], Awaitable[object]]] = {
            "retry": partial(self._admin, admin.retry),
            "cancel": self._cancel,
            "delete": partial(self._admin, admin.delete),
            "retry_dlq": partial(self._admin, admin.retry_dlq),
            "purge_dlq": partial(self._admin, admin.purge_dlq),
        }

    # -- lists --------------------------------------------------------------------------------
    async def list_jobs(
        self,
        where: ListFilter | None = None,
        /,
        *,
        sort: SortOrder | str = "-id",
        after: JobRow | SortKey | None = None,
        before_id: int | None = None,
        limit: int = 50,
        **fields: Unpack[FilterFields],
    ) -> list[JobRow]:
        """A page of the jobs ``where`` names (``ListFilter``; its fields may be passed as
        keywords instead), read in one snapshot, newest first unless ``sort`` says otherwise
        (``"-when"``, ``"attempts"``, ...: ``SortOrder``); the next page starts ``after`` the
        last row or its place ``SortOrder.key(row)`` (by id, ``before_id`` its id also works).
        Rows carry no output; ``has_output`` says if one exists. A filter ``ListFilter``
        refuses, or an order the state's indexes do not serve, raises ``InvalidFilter``."""
        where = ListFilter.given(where, fields)
        order = SortOrder.parse(sort)
        async with self._session.connection("list_jobs") as conn:
            outputs = await self._session.probe.present(conn)
            async with snapshot(conn):
                return await listing.list_jobs(
                    conn,
                    where,
                    before_id=before_id,
                    limit=limit,
                    outputs=outputs,
                    order=order,
                    after=after,
                )

    async def browse(
        self,
        where: ListFilter | None = None,
        /,
        *,
        sort: SortOrder | str = "-id",
        after: JobRow | SortKey | None = None,
        before_id: int | None = None,
        limit: int = 50,
        **fields: Unpack[FilterFields],
    ) -> JobPage:
        """``list_jobs`` and ``counts`` together, from one snapshot (what a screen shows). The
        counts follow ``since``/``before``; they do not follow kind, queue or search."""
        where = ListFilter.given(where, fields)
        order = SortOrder.parse(sort)
        async with self._session.connection("browse") as conn:
            outputs = await self._session.probe.present(conn)
            return await listing.browse(
                conn,
                where,
                before_id=before_id,
                limit=limit,
                outputs=outputs,
                count_cap=self.count_cap,
                order=order,
                after=after,
            )

    async def counts(self, *, cap: int | None = None) -> StateCounts:
        """Jobs per state, exact up to a cap and "at least the cap" above it (see
        ``StateCounts.capped`` and ``storage.read.counting``). By default the console's caps:
        ``count_cap`` for the live states, 1,000 for completed, failed and cancelled; an
        explicit ``cap`` applies to every state."""
        async with self._session.connection("counts") as conn, snapshot(conn):
            if cap is None:
                return await counting.counts(conn, cap=self.count_cap)
            return await counting.counts(conn, cap=cap, terminal_cap=cap, batches=cap)

    async def count_matching(
        self, where: ListFilter | None = None, /, **fields: Unpack[FilterFields]
    ) -> int:
        """How many jobs a bulk action on ``where`` would touch (shown before acting).

        Always exact, unlike the tab counts: it lists every matching id, as the action would,
        so its cost grows with the number of matches."""
        return len(await self._matching_ids(ListFilter.given(where, fields)))

    async def _matching_ids(self, where: ListFilter) -> list[int]:
        async with self._session.connection("bulk_action") as conn:
            outputs = await self._session.probe.present(conn)
            return await listing.matching_ids(conn, where, outputs=outputs, chunk=BULK_PAGE)

    async def bulk_action(
        self,
        action: str,
        where: ListFilter | None = None,
        /,
        *,
        ids: list[int] | None = None,
        dry_run: bool = False,
        actor: str | None = None,
        reason: str | None = None,
        **fields: Unpack[FilterFields],
    ) -> int:
        """Apply ``action`` to ``ids`` or to every job ``where`` matches; returns how many.

        ``dry_run`` only counts the targets. A job that no longer admits the action when its
        turn comes (it moved on, or was deleted meanwhile) is skipped, not an error, so the
        result can be lower than the count shown before acting.

        Audited as one entry (``bulk_<action>``, by ``actor`` with ``reason``): the ids when
        given, else the filter as text, and the count of jobs changed, which each job's own
        transaction raises by one (``storage.ops.audit``).
        """
        apply = self._actions.get(action)
        if apply is None:
            raise AwaError(
                f"Unknown bulk action {action!r}; use one of {', '.join(self._actions)}."
            )
        matching = ListFilter.given(where, fields)
        recorder = Recorder.bulk(Audit.of(actor, reason), action, matching, ids)
        targets = ids if ids is not None else await self._matching_ids(matching)
        if dry_run:
            return len(targets)
        done = 0
        for job_id in targets:
            try:
                await apply(job_id, recorder)
            except (InvalidJobState, JobNotFound):
                recorder.settled(committed=False)
                continue
            recorder.settled(committed=True)
            done += 1
        return done

    # -- queues and failure groups (storage.read.queues, storage.read.failure_groups) ----------
    async def pause_queue(
        self, queue: str, *, actor: str | None = None, reason: str | None = None
    ) -> None:
        """Stop every runtime on the schema claiming from ``queue`` (running jobs finish).
        Audited as ``actor`` (default ``default_actor()``) with ``reason``, as every operator
        write below is."""
        name, audit = check_stored_name(queue, "Queue"), Recorder(Audit.of(actor, reason))
        async with self._session.connection("pause_queue") as conn, conn.transaction():
            await queues.set_paused(conn, name, True)
            await audit.queue(conn, "pause_queue", name)

    async def resume_queue(
        self, queue: str, *, actor: str | None = None, reason: str | None = None
    ) -> None:
        """Let runtimes claim from ``queue`` again; idle ones serving it are woken at once."""
        name, audit = check_stored_name(queue, "Queue"), Recorder(Audit.of(actor, reason))
        async with self._session.connection("resume_queue") as conn, conn.transaction():
            await enqueue.resume_queue(conn, name)
            await audit.queue(conn, "resume_queue", name)

    async def list_schemas(self, only: Sequence[str] | None = None) -> list[SchemaSummary]:
        """The installed queue-storage schemas (those in ``only``, when given), each with its
        tab counts from its own snapshot: what the console's schema picker lists. One
        transaction over every schema ran out of lock slots (``max_locks_per_transaction``)
        with a few hundred of them installed."""
        async with self._session.connection("list_schemas") as conn:
            names = await schemas.installed(conn)
            if only is not None:
                names = [name for name in names if name in only]
            found = []
            for name in names:
                async with snapshot(conn):
                    found += await schemas.summaries(conn, [name], cap=self.count_cap)
            return found

    async def list_queues(self) -> list[QueueSummary]:
        """One summary per queue, read in one statement (one snapshot, one round trip);
        bounded whatever the history and the backlog."""
        async with self._session.connection("list_queues") as conn:
            return await queues.list_queues(conn)

    async def failure_groups(
        self,
        since: datetime | timedelta | None = None,
        kind: str | None = None,
        queue: str | None = None,
        limit: int = 50,
    ) -> list[FailureGroup]:
        """Failed, retryable and dead-lettered jobs grouped by kind and error signature."""
        where = ListFilter.of(kind=kind, queue=queue)
        async with self._session.connection("failure_groups") as conn:
            return await failure_groups.failure_groups(
                conn, since=since_moment(since), kind=where.kind, queue=where.queue, limit=limit
            )

    async def failure_group_jobs(
        self,
        kind: str,
        signature: str,
        *,
        since: datetime | timedelta | None = None,
        queue: str | None = None,
    ) -> FailureGroupMembers:
        """Every job of one group, by where it is: pass them to ``bulk_action`` (``retry`` the
        failed, ``retry_dlq`` the dead-lettered, ``cancel`` the retryable)."""
        for what, text in (("kind", kind), ("signature", signature), ("queue", queue)):
            check_text(what, text)
        async with self._session.connection("failure_group_jobs") as conn:
            return await failure_groups.group_members(
                conn, kind, signature, since=since_moment(since), queue=queue
            )

    async def attempt_timeline(self, job_id: int) -> list[AttemptSpan]:
        """The job's attempts, oldest first: claimed (and by which runtime), heartbeat,
        callback, ended (one snapshot)."""
        return (await self.job_timeline(job_id, with_job=False)).spans

    async def job_timeline(self, job_id: int, *, with_job: bool = True) -> JobTimeline:
        """The job (as ``get_job`` reads it, without its output: None when there is none) and
        its attempts, from one snapshot, so each failed attempt's error entry is in the row
        (``error_positions`` matches them)."""
        async with self._session.connection("job_timeline") as conn:
            registry = await self._session.runtimes_probe.present(conn)
            async with snapshot(conn):
                row = await one_job.read_job(conn, job_id, outputs=False) if with_job else None
                spans = await timeline.attempt_timeline(conn, job_id, registry=registry)
        return JobTimeline(row=row, spans=spans)

    # -- admin --------------------------------------------------------------------------------
    # Each is audited (``storage.ops.audit``) in the write's own transaction, as ``actor``
    # (None: ``default_actor()``, the OS user at the host) with the optional ``reason``.
    async def cancel_job(
        self, job_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> JobRow | None:
        return await self._cancel(job_id, Recorder(Audit.of(actor, reason)))

    async def _cancel(self, job_id: int, audit: Recorder) -> JobRow | None:
        row = await self._admin(admin.cancel, job_id, audit)
        if row is not None:  # after commit; a cancel that was refused raised before this
            self._session.events.emit(JobEvent("cancelled", row.id, row.kind, row.queue))
        return row

    async def retry_job(
        self,
        job_id: int,
        *,
        args: Any = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow | None:
        """Run a failed, cancelled or dead-lettered job again. With ``args``, it runs with
        those instead (an edit-and-retry), checked like an insert's (``storage.ops.job_args``);
        the audit entry keeps the original args."""
        audit = Recorder(Audit.of(actor, reason))
        if args is None:
            return await self._admin(admin.retry, job_id, audit)
        new_args = job_args.edited(args, self._tasks)
        return await self._admin(partial(admin.retry, args=new_args), job_id, audit)

    async def enqueue_job(
        self,
        kind: str,
        args: Any,
        *,
        queue: str | None = None,
        priority: int = 2,
        run_at: datetime | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow:
        """Enqueue one new job of a known kind, as an operator does from a form: the kind must
        have a handler here or a published descriptor (else ``UnknownKind``), the args pass
        ``check_args``, the queue defaults to ``default_queue``. Audited as ``enqueue`` (the
        new job, its queue, the args' size and sha256, never their text) in the insert's
        transaction; a worker serving the queue is woken (``storage.ops.enqueue_job``)."""
        audit = Recorder(Audit.of(actor, reason))
        options = {"priority": priority, "run_at": run_at}
        async with self._session.connection("enqueue_job") as conn:
            return await enqueue_job.enqueue(
                conn, self._tasks(), kind, args, queue=queue, options=options, audit=audit
            )

    def check_args(self, kind: str, args: Any, descriptor: JobKindDescriptor | None) -> str:
        """The args' JSON text, or ``ArgsValidationError`` (with ``path`` and ``rule``): the
        check ``enqueue_job`` and an edit-and-retry make, against the kind's args type
        registered here or the ``args_schema`` in ``descriptor``. No connection: a form runs
        it as the operator types."""
        return job_args.args_text(kind, args, self._tasks(), descriptor)

    def default_queue(self, kind: str, descriptor: JobKindDescriptor | None) -> str:
        """The queue ``enqueue_job`` uses for ``kind`` when none is given."""
        return enqueue_job.default_queue(kind, self._tasks(), descriptor)

    async def delete_job(
        self, job_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> None:
        await self._admin(admin.delete, job_id, Recorder(Audit.of(actor, reason)))

    async def retry_dlq(
        self, job_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> JobRow | None:
        return await self._admin(admin.retry_dlq, job_id, Recorder(Audit.of(actor, reason)))

    async def purge_dlq(
        self, job_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> None:
        await self._admin(admin.purge_dlq, job_id, Recorder(Audit.of(actor, reason)))

    async def _admin(
        self, action: Callable[..., Awaitable[object]], job_id: int, audit: Recorder
    ) -> JobRow | None:
        name = getattr(action, "func", action).__name__
        async with self._session.connection(
            name if name.endswith("dlq") else f"{name}_job"
        ) as conn:
            outputs = await self._session.probe.present(conn)
            await action(conn, job_id, outputs=outputs, audit=audit)
            return await one_job.get_job(conn, job_id, outputs=outputs)

    async def list_audit(
        self,
        *,
        since: datetime | timedelta | None = None,
        actor: str | None = None,
        action: str | None = None,
        job_id: int | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Audit entries, newest first, that match every given filter (one statement, at most
        ``storage.read.audit.MAX_LIMIT``); ``since`` as in ``failure_groups``."""
        for what, text in (("actor", actor), ("action", action)):
            check_text(what, text)
        async with self._session.connection("list_audit") as conn:
            return await audit.list_audit(
                conn,
                since=since_moment(since),
                actor=actor,
                action=action,
                job_id=job_id,
                limit=limit,
            )

    async def database_read_only(self) -> bool:
        async with self._session.connection("database_read_only") as conn:
            return await admin.database_read_only(conn)
