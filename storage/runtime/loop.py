"""The worker runtime: claims batches, runs handlers concurrently, heartbeats long attempts and
listens for cancellations and callback answers.

Each background loop (dispatch, heartbeat, listener, descriptor sync, maintenance) is one step
run under the ``Supervisor``: an error from the driver or the server costs a logged line and a
backoff, never the loop; a loop that cannot recover fails the runtime loudly (``health``,
``RuntimeFailed`` for a waiting caller), so a worker never idles on silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence

from storage.db.pool import Conn, pooled
from storage.db.sql import OPEN_ATTEMPTS
from storage.finalize.types import AttemptKey
from storage.ops import rescue
from storage.ops.maintenance import MaintenanceSettings, advance_horizon
from storage.read.descriptors import SYNC_INTERVAL_SECONDS
from storage.runtime import claim, executor
from storage.runtime.claim import ClaimedJob
from storage.runtime.host import WorkerHost
from storage.runtime.inflight import InFlight
from storage.runtime.sizing import PROBE_SECONDS, LagSeen, Sizing
from storage.runtime.supervise import Supervisor
from storage.values.errors import ConfigError, RuntimeFailed, describe
from storage.values.health import Health

log = logging.getLogger("storage")

SPAWN_WAVE = 64
"""Handlers started per turn of the event loop (``Runtime._start_handlers``)."""
RELEASE_TIMEOUT = 10.0
"""Seconds ``stop`` gives the write that hands abandoned attempts back (then rescue will)."""

HEARTBEAT = """
INSERT INTO attempt_state AS s (job_id, run_lease, claim_id, heartbeat_at, progress)
SELECT u.job_id, u.run_lease, u.claim_id, now(), u.progress
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::jsonb[])
       AS u(job_id, run_lease, claim_id, progress)
 WHERE NOT EXISTS (SELECT 1 FROM attempt_closures c
                    WHERE c.job_id = u.job_id AND c.run_lease = u.run_lease)
ON CONFLICT (job_id, run_lease) DO UPDATE
   SET heartbeat_at = now(), progress = COALESCE(excluded.progress, s.progress)
"""
# Attempts running here that an operator cancelled (admin.cancel closes them 'cancelled_admin').
# The cancel's notice reaches only a live LISTEN; this re-check, run after re-LISTENing and on
# every heartbeat, cancels the handlers whose notice was lost with the listener's connection.
CANCELLED_AMONG = """
SELECT c.job_id, c.run_lease
  FROM unnest($1::bigint[], $2::bigint[]) AS u(job_id, run_lease)
  JOIN attempt_closures c USING (job_id, run_lease)
 WHERE c.outcome = 'cancelled_admin'
"""
# Work left in these queues: claimable rows, or attempts still running anywhere (including
# ones a dead worker left behind, which maintenance will rescue).
# $2: also count due jobs still waiting for promotion (only a runtime that runs maintenance
# can be sure somebody will promote them). clock_timestamp(), not now(): a check that starts
# while a retry is being written can see the retry committed, stamped after its own now().
WORK_LEFT = f"""
WITH {OPEN_ATTEMPTS}
SELECT EXISTS (SELECT 1 FROM queue_lanes l
                WHERE queue = ANY($1::text[]) AND claim_seq < next_seq
                  AND NOT EXISTS (SELECT 1 FROM queue_settings qs  -- paused: not claimable
                                   WHERE qs.queue = l.queue
                                     AND (to_jsonb(qs) ->> 'paused')::boolean))
    OR EXISTS (SELECT 1 FROM open o
                 JOIN ready_entries r USING (job_id, run_lease)
                 LEFT JOIN attempt_state s USING (job_id, run_lease)
                WHERE r.queue = ANY($1::text[]) AND COALESCE(s.state, 'running') = 'running')
    OR ($2 AND EXISTS (SELECT 1 FROM deferred_jobs d
                        WHERE d.queue = ANY($1::text[]) AND d.run_at <= clock_timestamp()))
"""


class Runtime:
    """One dispatcher per started client."""

    def __init__(
        self,
        host: WorkerHost,
        queues: Sequence[str],
        *,
        queue_limits: Mapping[str, int] | None = None,
        sizing: Sizing,
        poll_interval: float,
        heartbeat_interval: float,
        deadline_seconds: float,
        maintenance: MaintenanceSettings,
        maintenance_interval: float | None,
        give_up_after: float | None = None,
        runtime_id: int | None = None,
    ) -> None:
        self.host = host
        self.runtime_id = runtime_id  # its registry row (storage.ops.runtimes), in every claim
        self.queues = list(queues)
        # Per-queue caps on running handlers (``start(queues={"mail": 8})``); the total stays
        # capped by the sizing's ceiling.
        self.queue_limits = dict(queue_limits or {})
        self.sizing = sizing
        self.limit = sizing.start  # jobs held at most right now (storage.runtime.sizing's rule)
        self._lag = LagSeen()  # the probe's readings, as the next claim's sizing sees them
        self.poll_interval = poll_interval
        self.heartbeat_interval = heartbeat_interval
        self.deadline_seconds = deadline_seconds
        self.maintenance = maintenance
        self.maintenance_interval = maintenance_interval
        # Keyed by (job_id, run_lease): plain tuples, equal to the AttemptKey they stand for.
        self.inflight: dict[tuple[int, int], InFlight] = {}
        self.stated: set[tuple[int, int]] = set()  # attempts with an attempt_state row
        self._wake = asyncio.Event()
        self._slot_free = asyncio.Event()
        self._quiet = asyncio.Event()
        self._stopping = asyncio.Event()  # ends the maintenance pause (``stop``)
        self._tasks: list[asyncio.Task[None]] = []
        self._maintainer: asyncio.Task[None] | None = None
        self._recheck_cancels = False
        self._claimed_since_quiet = False
        self.supervisor = Supervisor(self._on_fatal, give_up_after=give_up_after)

    def start(self) -> None:
        spawn = self.supervisor.spawn
        self._tasks = [
            spawn("dispatch", self._dispatch_step),
            spawn("heartbeat", self._heartbeat_step),
            spawn("listener", self._listener_step),
            spawn("descriptor sync", self._sync_step),
            spawn("lag probe", self._probe_step),
        ]
        if self.maintenance_interval is not None:
            self._maintainer = spawn("maintenance", self._maintain_step)
            self._tasks.append(self._maintainer)

    @property
    def health(self) -> Health:
        return self.supervisor.health

    @property
    def failed(self) -> str | None:
        return self.supervisor.failed

    def raise_if_failed(self) -> None:
        if (reason := self.supervisor.failed) is not None:
            raise RuntimeFailed(
                f"The worker runtime failed ({reason}) and claims no more jobs; "
                "call shutdown() and see the log."
            )

    def _on_fatal(self, _reason: str) -> None:
        """A loop gave up: stop the others and wake every waiter, which then raises."""
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self._quiet.set()

    def wake(self) -> None:
        self._wake.set()

    def slot_freed(self) -> None:
        """An attempt ended (``InFlight.release``): the dispatcher may claim for its slot."""
        self._slot_free.set()
        self._wake.set()

    def work_arrived(self, queue: str) -> None:
        """A ready notice (``storage.db.sql.READY_NOTICE``): claim now if the queue is ours
        ('' stands for a queue name too long for a notice)."""
        if queue in self.queues or not queue:
            self._wake.set()

    async def stop(self, *, abandon: bool = False, grace: float | None = None) -> None:
        """Stop claiming; wait for running handlers (or cancel them when ``abandon``, or
        those still running after ``grace`` seconds). The attempts of cancelled handlers are
        given back at once, after the completions of the others are flushed: retried (or
        failed, when that was their last attempt) with an error entry saying the worker shut
        down, in one transaction (``storage.ops.rescue.release_abandoned``). If that write
        fails they stay open until maintenance rescues them, as before."""
        self.supervisor.stop()
        self._stopping.set()
        self._wake.set()
        self._slot_free.set()
        for task in self._tasks:
            if task is not self._maintainer:  # its pass ends, so the lock goes with a reset
                task.cancel()
        try:
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            attempts = [a for a in self.inflight.values() if a.task is not None]
            running = [a.task for a in attempts if a.task is not None]
            if running and not abandon and grace is not None:
                _, late = await asyncio.wait(running, timeout=grace)
                abandon = bool(late)
            abandoned: list[InFlight] = []
            if abandon:
                for attempt in attempts:
                    if attempt.task is not None and not attempt.task.done():
                        abandoned.append(attempt)
                        attempt.task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await self.host.batcher.drain()
        except asyncio.CancelledError:
            # The stop itself was cancelled (``Client.close``'s bound ran out): nothing of
            # this runtime may keep running after it, so every handler is abandoned (rescue
            # gives those jobs back later: there is no time left to write it now).
            if self._maintainer is not None:
                self._maintainer.cancel()
            for attempt in list(self.inflight.values()):
                if attempt.task is not None:
                    attempt.task.cancel()
            raise
        if abandoned:
            await self._release(abandoned)

    async def _release(self, abandoned: list[InFlight]) -> None:
        """Give back the abandoned attempts (``stop``); a failure is logged, never raised: the
        runtime is stopping either way, and rescue still ends them later."""
        records = []
        for attempt in abandoned:
            record = executor.attempt_record(attempt.claimed)
            if attempt.job is not None:
                record.progress = attempt.job.progress_set
            records.append((record, attempt.claimed.kind, attempt.claimed.queue))
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT):
                async with pooled(self.host.pool) as conn:
                    released = await rescue.release_abandoned(conn, records)
        except Exception as exc:  # TimeoutError too
            log.warning(
                "could not give back %d abandoned attempts at shutdown (%s); maintenance "
                "rescues them once their heartbeat is %ss old",
                len(records),
                describe(exc),
                self.maintenance.heartbeat_stale_seconds,
            )
            return
        rescue.emit_rescued(self.host.events, released)

    def cancel_attempt(self, key: AttemptKey) -> None:
        attempt = self.inflight.get(key)
        if attempt is not None and attempt.job is not None:
            attempt.job.cancel()

    async def wait_quiet(self) -> None:
        """Wait until a claim (at the dispatcher's pace) came back empty with nothing running.
        Raises ``RuntimeFailed`` instead of waiting forever on a runtime that failed."""
        self._quiet.clear()
        self.raise_if_failed()
        await self._quiet.wait()
        self.raise_if_failed()
        await self.host.batcher.drain()

    async def idle(self) -> bool:
        """No handler running here, nothing to flush, nothing claimable or running in our
        queues, and, when this runtime runs maintenance, nothing due waiting for promotion."""
        if self.inflight or not self.host.batcher.idle:
            return False
        promoting = self.maintenance_interval is not None
        async with pooled(self.host.pool) as conn:
            return not await conn.fetchval(WORK_LEFT, self.queues, promoting)

    async def _dispatch_step(self) -> None:
        """Wait for free slots, claim a batch and start its handlers (or wait for work)."""
        want = self.sizing.to_claim(self.limit, len(self.inflight))
        room = self._queue_room()
        if not want or not room:
            self._slot_free.clear()
            await self._slot_free.wait()
            return
        # Cleared before the claim: a wake-up that arrives while it runs is kept for the wait.
        self._wake.clear()
        async with pooled(self.host.pool) as conn:
            began = time.perf_counter()
            jobs = await claim.claim_batch(
                conn, list(room), want, self.deadline_seconds, room, self.runtime_id
            )
            took = time.perf_counter() - began
        if jobs:
            self.host.job_metrics.claimed(jobs[0].queue, jobs, took)
        filled = len(jobs) == want
        self.limit = self.sizing.next_limit(self.limit, filled=filled, lag=self._lag.take())
        if jobs:
            self._quiet.clear()
            self._claimed_since_quiet = True
        elif not self.inflight:
            if self._claimed_since_quiet:
                await self._advance_horizon_after_work()
            self._quiet.set()
        await self._start_handlers(jobs)
        if not jobs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)

    def _queue_room(self) -> dict[str, int]:
        """Our queues with room for another handler, and that room (uncapped: the ceiling)."""
        ceiling = self.sizing.ceiling
        if not self.queue_limits:
            return dict.fromkeys(self.queues, ceiling)
        running: dict[str, int] = {}
        for attempt in self.inflight.values():
            running[attempt.claimed.queue] = running.get(attempt.claimed.queue, 0) + 1
        room = {q: self.queue_limits.get(q, ceiling) - running.get(q, 0) for q in self.queues}
        return {q: n for q, n in room.items() if n > 0}

    async def _advance_horizon_after_work(self) -> None:
        """The runtime ran out of work: flush its completions and move the rescue horizon past
        the batches that ended, as a maintenance pass would. Reads of open attempts scan only
        the claim batches above the horizon, so straight after a load they stay bounded even
        where no runtime runs maintenance (``maintenance_interval=None``)."""
        await self.host.batcher.drain()
        async with pooled(self.host.pool) as conn:
            await advance_horizon(conn)
        self._claimed_since_quiet = False

    async def _start_handlers(self, jobs: list[ClaimedJob]) -> None:
        """Hold a claim's jobs, then start their handlers ``SPAWN_WAVE`` per turn of the loop.

        A job's task is six objects the garbage collector tracks (task, coroutine, context,
        handle, step wrapper, weak reference) until its first step: a claim of 512 started at
        once had ~3,000 of them waiting together, four young collections per claim that
        promoted them on towards the full one. In waves, quick handlers are done, and their
        objects freed, before the next wave is made; handlers that await still all run. The
        batcher holds its timer meanwhile, so the quick ones' completions share one flush."""
        inflight = self.inflight
        attempts = []
        for claimed in jobs:
            attempt = inflight[claimed.job_id, claimed.run_lease] = InFlight(self, claimed)
            attempts.append(attempt)
        loop, started = asyncio.get_running_loop(), 0
        self.host.batcher.hold()
        try:
            while started < len(attempts):
                if started:
                    await asyncio.sleep(0)
                for attempt in attempts[started : started + SPAWN_WAVE]:
                    attempt.task = loop.create_task(attempt.run())
                started += SPAWN_WAVE
        finally:  # stopped between waves: the rest start too, as every held job always did
            for attempt in attempts[started:]:
                attempt.task = loop.create_task(attempt.run())
            self.host.batcher.release()

    async def _heartbeat_step(self) -> None:
        await asyncio.sleep(self.heartbeat_interval)
        await self.heartbeat_now()

    async def _listener_step(self) -> None:
        """LISTEN (again, on a fresh connection after losing one), then wait for a loss.

        After listening again, cancels sent while no LISTEN was live are looked up: listening
        first, then reading, leaves no gap a cancel could fall into."""
        if not self.host.notices.active:
            self._recheck_cancels = True
        await self.host.ensure_listener()
        if self._recheck_cancels:
            async with pooled(self.host.pool) as conn:
                await self.cancel_cancelled(conn, [AttemptKey(*key) for key in self.inflight])
            self._recheck_cancels = False
        await self.host.notices.wait_lost(self.heartbeat_interval)

    async def _probe_step(self) -> None:
        """Measure how late a timer fires: the loop's lag, which sizes the limit. Only when
        jobs are held as it fires: a prompt idle loop says nothing about the jobs it will hold.

        Lateness counts only as far as this thread spent the CPU for it (its CPU time past
        the timer's interval): a timer late because the host gave the process no core is
        no reason to hold fewer jobs."""
        loop = asyncio.get_running_loop()
        due, cpu = loop.time() + PROBE_SECONDS, time.thread_time()
        await asyncio.sleep(PROBE_SECONDS)
        late = min(loop.time() - due, time.thread_time() - cpu - PROBE_SECONDS)
        if self.inflight:
            self._lag.record(late)

    async def _sync_step(self) -> None:
        await asyncio.sleep(SYNC_INTERVAL_SECONDS)
        await self.host.sync_descriptors()

    async def _maintain_step(self) -> None:
        """One maintenance pass (only the leader does the work: it keeps the lock across
        passes, ``storage.ops.leadership``), then a pause that ``stop`` ends.

        ``stop`` lets a pass under way finish rather than cancel it: ``Worker.shutdown`` then
        gives the leader's connection back with a reset that unlocks it, so the lock has gone
        when shutdown returns (a terminated connection drops it only once its backend exits).
        """
        assert self.maintenance_interval is not None
        try:
            report = await self.host.lead_maintenance(self.maintenance)
            if report.promoted or report.periodic:
                self._wake.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.maintenance_interval):
                    await self._stopping.wait()
        except asyncio.CancelledError:
            # The runtime failed, or its stop was cut short: the lock goes now, so another
            # runtime leads the next pass (a failed runtime is kept until shutdown(), its lock
            # must not be).
            await self.host.resign_maintenance()
            raise

    async def heartbeat_now(self) -> None:
        """Record liveness (and progress) for attempts running longer than one interval."""
        beats = [attempt for attempt in self.inflight.values() if attempt.running]
        if not beats:
            return
        async with pooled(self.host.pool) as conn:
            await conn.execute(
                HEARTBEAT,
                [a.claimed.job_id for a in beats],
                [a.claimed.run_lease for a in beats],
                [a.claimed.claim_id for a in beats],
                [a.job.progress_set if a.job else None for a in beats],
            )
            keys = [AttemptKey(a.claimed.job_id, a.claimed.run_lease) for a in beats]
            # The fallback for cancel notices lost some other way.
            await self.cancel_cancelled(conn, keys)
        self.stated.update(keys)

    async def cancel_cancelled(self, conn: Conn, keys: list[AttemptKey]) -> None:
        """Tell the handlers of ``keys`` whose attempts an operator cancelled, exactly as the
        cancel notice does (``cancel_attempt``); a handler told twice is told once."""
        if not keys:
            return
        rows = await conn.fetch(
            CANCELLED_AMONG, [k.job_id for k in keys], [k.run_lease for k in keys]
        )
        for row in rows:
            self.cancel_attempt(AttemptKey(row["job_id"], row["run_lease"]))

    def has_state(self, key: AttemptKey) -> bool:
        return key in self.stated


def queue_limits(queues: Sequence[str] | Mapping[str, int] | None) -> dict[str, int]:
    """The per-queue caps of ``start(queues={"mail": 8})``; none for a plain list."""
    if not isinstance(queues, Mapping):
        return {}
    for queue, limit in queues.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"The limit of queue {queue!r} must be a whole number of at least 1.")
    return dict(queues)
