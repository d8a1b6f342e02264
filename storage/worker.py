"""The client's worker part: starting, watching and stopping its ``Runtime``.

It holds at most one runtime at a time and answers what the rest of the client asks about it
(is an attempt's state materialized, wake the dispatcher, a cancel notice arrived).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from storage.db.pool import translate_errors
from storage.finalize.types import AttemptKey, AttemptRef
from storage.ops import runtimes
from storage.ops.maintenance import MaintenanceSettings
from storage.runtime import heap
from storage.runtime.host import WorkerHost
from storage.runtime.loop import Runtime, queue_limits
from storage.runtime.sizing import Sizing
from storage.runtime.supervise import is_transient
from storage.session import Session
from storage.values.errors import AwaError, DatabaseError, ReadOnlyError, StartFailed, describe
from storage.values.health import STOPPED, Health
from storage.values.names import check_stored_name

log = logging.getLogger("storage")


class Worker:
    """Runs the jobs of ``host``'s registered tasks; one per client."""

    def __init__(self, host: WorkerHost, session: Session) -> None:
        self._host = host
        self._session = session
        self.runtime: Runtime | None = None

    async def start(
        self,
        queues: Sequence[str] | Mapping[str, int] | None = None,
        *,
        concurrency: int | None = None,
        claim_size: int | None = None,
        claim_threshold: int | None = None,
        poll_interval: float = 1.0,
        heartbeat_interval: float = 10.0,
        deadline_seconds: float = 1800.0,
        maintenance: MaintenanceSettings | None = None,
        maintenance_interval: float | None = 1.0,
        give_up_after: float | None = None,
        gc_freeze: bool = True,
        name: str | None = None,
    ) -> None:
        """Start running jobs from ``queues`` (default: the registered tasks' queues); a mapping
        such as ``{"mail": 8}`` also caps how many of each queue's handlers run at once here.

        A start that fails raises and leaves the client as it was: ``start()`` may be called
        again. ``give_up_after``: seconds a background loop may keep failing on connection
        errors before the runtime fails (default: retry for as long as it takes).
        ``concurrency`` and ``claim_size`` are hard caps; left out, the runtime sizes itself
        (``storage.runtime.sizing``: up to 1,024 jobs held, claims of up to 512).
        ``poll_interval``: seconds an idle runtime waits between claims when nothing wakes it;
        every way a job becomes ready sends a notice that wakes it at once, so the poll is only
        the fallback for a notice lost with the listener (docs/runtime.md, Wake-up).
        ``gc_freeze``: the first start in a process freezes the heap it finds
        (``storage.runtime.heap``, docs/runtime.md); ``False`` leaves the garbage collector alone.
        ``name``: how the runtime registry (``storage.ops.runtimes``) names this runtime beside
        its host, process id and start time (``awa-tui worker`` gives its ``module:tasks``).
        """
        if self.runtime is not None:
            if (reason := self.runtime.failed) is not None:
                raise AwaError(
                    f"This client's runtime failed ({reason}); call shutdown() before starting "
                    "it again."
                )
            raise AwaError("This client is already running.")
        limits = queue_limits(queues)
        sized = Sizing.of(concurrency, claim_size, claim_threshold)
        chosen = (
            [check_stored_name(q, "Queue") for q in queues]
            if queues is not None
            else sorted({s.queue for s in self._host.tasks.values()})
        )
        runtime = Runtime(
            self._host,
            chosen or ["default"],
            queue_limits=limits,
            sizing=sized,
            poll_interval=poll_interval,
            heartbeat_interval=heartbeat_interval,
            deadline_seconds=deadline_seconds,
            maintenance=maintenance or MaintenanceSettings(),
            maintenance_interval=maintenance_interval,
            give_up_after=give_up_after,
        )
        notices = self._host.notices
        listening, step = notices.active, "record its task descriptors"
        try:
            await self._host.sync_descriptors()
            step = "store its periodic schedules"
            await self._host.store_schedules()
            step = "listen for cancellations"
            await self.ensure_listener()
            step = "register in the runtime registry"
            async with self._session.connection("start") as conn:
                runtime.runtime_id = await runtimes.register(conn, name)
        except BaseException as exc:
            if not listening:
                await notices.close()
            error = _start_error(exc, step)
            if error is exc:
                raise
            raise error from exc
        if gc_freeze:
            heap.freeze_once()
        self.runtime = runtime
        runtime.start()

    @property
    def health(self) -> Health:
        """The runtime's health: stopped, running, degraded (since, why) or failed (why)."""
        return self.runtime.health if self.runtime is not None else STOPPED

    async def shutdown(self, *, abandon: bool = False, grace: float | None = None) -> None:
        """Stop the runtime, letting running handlers finish (within ``grace`` seconds, when
        given) or abandoning them; abandoned attempts run again once maintenance rescues them."""
        runtime, self.runtime = self.runtime, None
        try:
            if runtime is not None:
                await runtime.stop(abandon=abandon, grace=grace)
            await self._host.batcher.drain()
        finally:  # even when stopping failed or was cancelled: the listener's slot comes back,
            try:  # and the maintenance leader's (its lock with it), if the runtime kept it
                await self._host.resign_maintenance()
            finally:
                await self._host.notices.close()

    async def run_until_idle(self, /, queues: Sequence[str] | None = None, **options: Any) -> None:
        """Run workers until no available or running job is left in the queues (tests, demos).

        With maintenance on (the default), a job already due but not yet promoted, such as a
        rescued attempt retried at once, counts as available. Raises ``RuntimeFailed`` when the
        runtime fails instead of waiting for it forever.
        """
        started_here = self.runtime is None
        if started_here:
            await self.start(queues, **options)
        runtime = self.runtime
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

    async def ensure_listener(self) -> None:
        """LISTEN for cancellations and callback answers; re-established after a lost connection."""
        with translate_errors(self._session.dsn, "listen"):
            await self._host.notices.ensure()

    def has_attempt_state(self, ref: AttemptRef) -> bool:
        runtime = self.runtime  # most runtimes hold no state row: no key is built then
        return runtime is not None and bool(runtime.stated) and runtime.has_state(ref.key)

    def mark_stated(self, key: AttemptKey) -> None:
        """The attempt now has an ``attempt_state`` row (its completion must drop it)."""
        if self.runtime is not None:
            self.runtime.stated.add(key)

    def wake(self) -> None:
        """New work may be claimable: claim now rather than at the next poll."""
        if self.runtime is not None:
            self.runtime.wake()

    def on_ready_notice(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        """Jobs became ready in the queue named by ``payload``: claim now if it is ours."""
        if self.runtime is not None:
            self.runtime.work_arrived(str(payload))

    def on_cancel_notice(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        job_id, _, run_lease = str(payload).partition(":")
        if self.runtime is not None and run_lease:
            self.runtime.cancel_attempt(AttemptKey(int(job_id), int(run_lease)))


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
