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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from storage import claim, executor
from storage.claim import ClaimedJob
from storage.db import Conn
from storage.descriptors import SYNC_INTERVAL_SECONDS
from storage.errors import RuntimeFailed
from storage.finalize import AttemptRef
from storage.health import Health
from storage.job import Job
from storage.maintenance import MaintenanceSettings
from storage.sql_shared import OPEN_ATTEMPTS
from storage.supervise import Supervisor

if TYPE_CHECKING:
    from storage.client import Client

log = logging.getLogger("storage")

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
SELECT EXISTS (SELECT 1 FROM queue_lanes WHERE queue = ANY($1::text[]) AND claim_seq < next_seq)
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
        client: Client,
        queues: Sequence[str],
        *,
        concurrency: int,
        claim_size: int,
        claim_threshold: int | None,
        poll_interval: float,
        heartbeat_interval: float,
        deadline_seconds: float,
        maintenance: MaintenanceSettings,
        maintenance_interval: float | None,
        give_up_after: float | None = None,
    ) -> None:
        self.client = client
        self.queues = list(queues)
        self.concurrency = concurrency
        self.claim_size = claim_size
        # Claim only once this many slots are free (or nothing runs): bigger claim batches
        # mean fewer compact completion rows and fewer claim round trips.
        self.claim_threshold = claim_threshold or max(1, min(claim_size, concurrency) // 2)
        self.poll_interval = poll_interval
        self.heartbeat_interval = heartbeat_interval
        self.deadline_seconds = deadline_seconds
        self.maintenance = maintenance
        self.maintenance_interval = maintenance_interval
        self.inflight: dict[
            tuple[int, int], tuple[ClaimedJob, list[Job[Any]], asyncio.Task[Any]]
        ] = {}
        self.stated: set[tuple[int, int]] = set()
        self._wake = asyncio.Event()
        self._slot_free = asyncio.Event()
        self._quiet = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._recheck_cancels = False
        self.supervisor = Supervisor(self._on_fatal, give_up_after=give_up_after)

    def start(self) -> None:
        spawn = self.supervisor.spawn
        self._tasks = [
            spawn("dispatch", self._dispatch_step),
            spawn("heartbeat", self._heartbeat_step),
            spawn("listener", self._listener_step),
            spawn("descriptor sync", self._sync_step),
        ]
        if self.maintenance_interval is not None:
            self._tasks.append(spawn("maintenance", self._maintain_step))

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

    async def stop(self, *, abandon: bool = False) -> None:
        """Stop claiming; wait for running handlers (or cancel them when ``abandon``)."""
        self.supervisor.stop()
        self._wake.set()
        self._slot_free.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        running = [entry[2] for entry in self.inflight.values()]
        if abandon:
            for task in running:
                task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await self.client.batcher.drain()

    def cancel_attempt(self, job_id: int, run_lease: int) -> None:
        entry = self.inflight.get((job_id, run_lease))
        if entry and entry[1]:
            entry[1][0]._cancelled.set()

    async def wait_quiet(self) -> None:
        """Wait until a claim (at the dispatcher's pace) came back empty with nothing running.
        Raises ``RuntimeFailed`` instead of waiting forever on a runtime that failed."""
        self._quiet.clear()
        self.raise_if_failed()
        await self._quiet.wait()
        self.raise_if_failed()
        await self.client.batcher.drain()

    async def idle(self) -> bool:
        """No handler running here, nothing to flush, nothing claimable or running in our
        queues, and, when this runtime runs maintenance, nothing due waiting for promotion."""
        if self.inflight or not self.client.batcher.idle:
            return False
        promoting = self.maintenance_interval is not None
        async with self.client.pool.acquire() as conn:
            return not await conn.fetchval(WORK_LEFT, self.queues, promoting)

    async def _dispatch_step(self) -> None:
        """Wait for free slots, claim a batch and start its handlers (or wait for work)."""
        free = self.concurrency - len(self.inflight)
        if free <= 0 or (self.inflight and free < self.claim_threshold):
            self._slot_free.clear()
            await self._slot_free.wait()
            return
        async with self.client.pool.acquire() as conn:
            jobs = await claim.claim_batch(
                conn, self.queues, min(free, self.claim_size), self.deadline_seconds
            )
        if jobs:
            self._quiet.clear()
        elif not self.inflight:
            self._quiet.set()
        for claimed in jobs:
            self._spawn(claimed)
        if not jobs:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)

    def _spawn(self, claimed: ClaimedJob) -> None:
        holder: list[Job[Any]] = []
        key = (claimed.job_id, claimed.run_lease)
        task = asyncio.get_running_loop().create_task(
            executor.run_attempt(self.client, claimed, holder)
        )
        self.inflight[key] = (claimed, holder, task)

        def done(finished: asyncio.Task[Any]) -> None:
            self.inflight.pop(key, None)
            self.stated.discard(key)
            self._slot_free.set()
            self._wake.set()
            if not finished.cancelled() and finished.exception() is not None:
                # The class only: a driver error's message can quote the data it choked on.
                failure = type(finished.exception()).__name__
                log.error("attempt of job %s failed to finalize (%s)", key[0], failure)

        task.add_done_callback(done)

    async def _heartbeat_step(self) -> None:
        await asyncio.sleep(self.heartbeat_interval)
        await self.heartbeat_now()

    async def _listener_step(self) -> None:
        """LISTEN (again, on a fresh connection after losing one), then wait for a loss.

        After listening again, cancels sent while no LISTEN was live are looked up: listening
        first, then reading, leaves no gap a cancel could fall into."""
        if not self.client.notices.active:
            self._recheck_cancels = True
        await self.client.ensure_listener()
        if self._recheck_cancels:
            async with self.client.pool.acquire() as conn:
                await self.cancel_cancelled(conn, list(self.inflight))
            self._recheck_cancels = False
        await self.client.notices.wait_lost(self.heartbeat_interval)

    async def _sync_step(self) -> None:
        await asyncio.sleep(SYNC_INTERVAL_SECONDS)
        await self.client.sync_descriptors()

    async def _maintain_step(self) -> None:
        """One maintenance pass (only the leader of each pass does the work), then a pause."""
        assert self.maintenance_interval is not None
        report = await self.client.run_maintenance(self.maintenance)
        if report.promoted or report.periodic:
            self._wake.set()
        await asyncio.sleep(self.maintenance_interval)

    async def heartbeat_now(self) -> None:
        """Record liveness (and progress) for attempts running longer than one interval."""
        beats = [
            (claimed, holder[0] if holder else None)
            for claimed, holder, task in self.inflight.values()
            if not task.done()
        ]
        if not beats:
            return
        async with self.client.pool.acquire() as conn:
            await conn.execute(
                HEARTBEAT,
                [c.job_id for c, _ in beats],
                [c.run_lease for c, _ in beats],
                [c.claim_id for c, _ in beats],
                [j.progress if j is not None and j._progress_dirty else None for _, j in beats],
            )
            # The fallback for cancel notices lost some other way.
            await self.cancel_cancelled(conn, [(c.job_id, c.run_lease) for c, _ in beats])
        self.stated.update((c.job_id, c.run_lease) for c, _ in beats)

    async def cancel_cancelled(self, conn: Conn, keys: list[tuple[int, int]]) -> None:
        """Tell the handlers of ``keys`` whose attempts an operator cancelled, exactly as the
        cancel notice does (``cancel_attempt``); a handler told twice is told once."""
        if not keys:
            return
        rows = await conn.fetch(CANCELLED_AMONG, [k[0] for k in keys], [k[1] for k in keys])
        for row in rows:
            self.cancel_attempt(row["job_id"], row["run_lease"])

    def has_state(self, ref: AttemptRef) -> bool:
        return ref.key in self.stated
