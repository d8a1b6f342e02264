"""The worker runtime: claims batches, runs handlers concurrently, heartbeats long attempts and
listens for cancellations and callback answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from storage import claim, executor
from storage.batcher import RETRYABLE
from storage.claim import ClaimedJob
from storage.descriptors import SYNC_INTERVAL_SECONDS
from storage.errors import ConnectionFailed
from storage.finalize import AttemptRef
from storage.job import Job
from storage.listing import OPEN_ATTEMPTS
from storage.maintenance import MaintenanceSettings

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
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._dispatch()), loop.create_task(self._heartbeat())]
        if self.maintenance_interval is not None:
            self._tasks.append(loop.create_task(self._maintain(self.maintenance_interval)))

    def wake(self) -> None:
        self._wake.set()

    async def stop(self, *, abandon: bool = False) -> None:
        """Stop claiming; wait for running handlers (or cancel them when ``abandon``)."""
        self._stopping = True
        self._wake.set()
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
        """Wait until a claim (at the dispatcher's pace) came back empty with nothing running."""
        self._quiet.clear()
        await self._quiet.wait()
        await self.client.batcher.drain()

    async def idle(self) -> bool:
        """No handler running here, nothing to flush, nothing claimable or running in our
        queues, and, when this runtime runs maintenance, nothing due waiting for promotion."""
        if self.inflight or not self.client.batcher.idle:
            return False
        promoting = self.maintenance_interval is not None
        async with self.client.pool.acquire() as conn:
            return not await conn.fetchval(WORK_LEFT, self.queues, promoting)

    async def _dispatch(self) -> None:
        while not self._stopping:
            free = self.concurrency - len(self.inflight)
            if free <= 0 or (self.inflight and free < self.claim_threshold):
                self._slot_free.clear()
                await self._slot_free.wait()
                continue
            try:
                async with self.client.pool.acquire() as conn:
                    jobs = await claim.claim_batch(
                        conn, self.queues, min(free, self.claim_size), self.deadline_seconds
                    )
            except RETRYABLE as exc:
                log.warning("claim failed (%s); retrying", type(exc).__name__)
                jobs = []
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

    async def _heartbeat(self) -> None:
        synced = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            await self.heartbeat_now()
            try:
                await self.client.ensure_listener()
                if asyncio.get_running_loop().time() - synced >= SYNC_INTERVAL_SECONDS:
                    synced = asyncio.get_running_loop().time()
                    await self.client.sync_descriptors()
            except (*RETRYABLE, ConnectionFailed) as exc:
                log.warning("listener or descriptor sync failed (%s)", type(exc).__name__)

    async def _maintain(self, interval: float) -> None:
        """Periodic maintenance passes; only the leader of each pass does the work."""
        while True:
            try:
                report = await self.client.run_maintenance(self.maintenance)
                if report.promoted:
                    self._wake.set()
            except (*RETRYABLE, ConnectionFailed) as exc:
                log.warning("maintenance pass failed (%s)", type(exc).__name__)
            await asyncio.sleep(interval)

    async def heartbeat_now(self) -> None:
        """Record liveness (and progress) for attempts running longer than one interval."""
        beats = [
            (claimed, holder[0] if holder else None)
            for claimed, holder, task in self.inflight.values()
            if not task.done()
        ]
        if not beats:
            return
        try:
            async with self.client.pool.acquire() as conn:
                await conn.execute(
                    HEARTBEAT,
                    [c.job_id for c, _ in beats],
                    [c.run_lease for c, _ in beats],
                    [c.claim_id for c, _ in beats],
                    [j.progress if j is not None and j._progress_dirty else None for _, j in beats],
                )
        except RETRYABLE as exc:
            log.warning("heartbeat failed (%s)", type(exc).__name__)
            return
        self.stated.update((c.job_id, c.run_lease) for c, _ in beats)

    def has_state(self, ref: AttemptRef) -> bool:
        return ref.key in self.stated
