"""The client's callback part: a running handler registers and waits for a callback; an
external system completes, fails, retries, heartbeats or answers it.

The SQL and the guards are in ``storage.ops.callbacks``; this part adds connections, waiting on
the LISTEN channel, metrics and events.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from storage.finalize.types import AttemptKey, AttemptRef
from storage.ops import callbacks
from storage.ops.audit import Recorder
from storage.ops.callbacks import ExternalCompletion
from storage.ops.declared_output import LocalModels
from storage.read import one_job
from storage.runtime.job import Job
from storage.session import Session
from storage.values.audit import Audit
from storage.values.errors import AwaError, StaleAttempt
from storage.values.events import JobEvent
from storage.values.models import JobRow
from storage.values.results import CallbackToken


class Listening(Protocol):
    """What waiting for an answer needs from the client's worker part."""

    async def ensure_listener(self) -> None: ...

    def mark_stated(self, key: AttemptKey) -> None: ...


class CallbackOperations:
    """Callbacks for one client; wakes its waiters on the callback channel's notices."""

    def __init__(self, session: Session, listening: Listening, local_models: LocalModels) -> None:
        self._session = session
        self._listening = listening
        self._local_models = local_models
        self.waiters: dict[str, asyncio.Event] = {}
        self.loop: asyncio.AbstractEventLoop | None = None  # the client's, for the sync call

    async def register_callback(self, job: Job[Any], timeout_seconds: float) -> CallbackToken:
        claim_id = job.claim_id
        if claim_id is None:
            raise StaleAttempt(f"Job {job.id} is not running in this client.")
        ref = AttemptRef(job.id, job.run_lease, claim_id)
        async with self._session.connection("register_callback") as conn:
            callback_id = await callbacks.register(conn, ref, timeout_seconds)
        if callback_id is None:
            raise StaleAttempt(f"Job {job.id}'s attempt has already ended.")
        self._listening.mark_stated(ref.key)
        return CallbackToken(callback_id, job.id, job.run_lease)

    async def wait_for_callback(self, job: Job[Any], token: CallbackToken) -> Any:
        event = self.waiters.setdefault(token.callback_id, asyncio.Event())
        # Shown as waiting first; then LISTEN before the first poll, so an answer that lands
        # after that poll is heard (one that lands before it is read by the poll).
        async with self._session.connection("wait_for_callback") as conn:
            await conn.execute(callbacks.MARK_WAITING, token.callback_id)
        await self._listening.ensure_listener()
        try:
            while True:
                async with self._session.connection("wait_for_callback") as conn:
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
            self.waiters.pop(token.callback_id, None)

    async def complete_external(
        self,
        callback_id: str,
        payload: Any = None,
        *,
        output: Any = None,
        run_lease: int | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow:
        """Complete a waiting job. The payload is not stored; ``output`` is, after validation.

        Audited as ``actor`` (default ``default_actor()``) with ``reason``; the entry keeps the
        output's size and sha256, never its text (every external call below is audited)."""
        del payload  # accepted for compatibility with callers that send one; never stored
        return await self.complete_external_with(
            callback_id,
            ExternalCompletion(output=output, run_lease=run_lease),
            actor=actor,
            reason=reason,
        )

    async def complete_external_with(
        self,
        callback_id: str,
        opts: ExternalCompletion,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow:
        opts.precheck()  # fail before touching the database
        audit = Recorder(Audit.of(actor, reason), optional=True)
        session = self._session
        async with session.connection("complete_external") as conn:
            supported = await session.probe.present(conn)
            row, stored, dropped = await callbacks.complete_external(
                conn,
                callback_id,
                opts,
                outputs_supported=supported,
                local_models=self._local_models,
                audit=audit,
            )
        if dropped:
            session.metrics.dropped(row.kind, row.queue, "schema_missing")
        session.events.emit(
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
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow:
        """``complete_external`` for synchronous code running outside the client's event loop."""
        loop = self.loop
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
            self.complete_external(
                callback_id, payload, output=output, run_lease=run_lease, actor=actor, reason=reason
            ),
            loop,
        )
        return future.result()

    async def fail_external(
        self,
        callback_id: str,
        error: str,
        *,
        run_lease: int | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow | None:
        audit = Recorder(Audit.of(actor, reason), optional=True)
        async with self._session.connection("fail_external") as conn:
            job_id = await callbacks.fail_external(
                conn, callback_id, error, run_lease=run_lease, audit=audit
            )
            row = await one_job.get_job(
                conn, job_id, outputs=await self._session.probe.present(conn)
            )
        if row is not None:  # committed: the job failed for good
            self._session.events.emit(JobEvent("exhausted", row.id, row.kind, row.queue))
        return row

    async def retry_external(
        self,
        callback_id: str,
        *,
        run_lease: int | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> JobRow | None:
        audit = Recorder(Audit.of(actor, reason), optional=True)
        async with self._session.connection("retry_external") as conn:
            job_id = await callbacks.retry_external(
                conn, callback_id, run_lease=run_lease, audit=audit
            )
            row = await one_job.get_job(
                conn, job_id, outputs=await self._session.probe.present(conn)
            )
        if row is not None:  # committed: the job runs again
            self._session.events.emit(JobEvent("retried", row.id, row.kind, row.queue))
        return row

    async def heartbeat_callback(
        self,
        callback_id: str,
        timeout_seconds: float = 3600,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> None:
        audit = Recorder(Audit.of(actor, reason), optional=True)
        async with self._session.connection("heartbeat_callback") as conn:
            await callbacks.heartbeat(conn, callback_id, timeout_seconds, audit=audit)

    async def resolve_callback(self, callback_id: str, payload: Any = None) -> None:
        """Answer a handler waiting in ``wait_for_callback``; it resumes with ``payload``."""
        async with self._session.connection("resolve_callback") as conn:
            await callbacks.resolve(conn, callback_id, payload)

    def on_listener_lost(self) -> None:
        for event in self.waiters.values():
            event.set()  # waiters re-check the database themselves

    def on_notice(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        event = self.waiters.get(str(payload))
        if event is not None:
            event.set()
