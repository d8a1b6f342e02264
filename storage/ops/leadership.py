"""The maintenance leader kept across passes: one pass per interval for a whole fleet.

A runtime that wins the leader's session lock (``TRY_LOCK_MAINTENANCE_LEADER``) keeps it, and
the pooled connection whose session holds it, for as long as it runs: each of its passes runs
on that connection, so no other session can run one meanwhile. The others (followers) try the
lock only every ``FOLLOWER_TRY_EVERY`` of their intervals, one statement on a borrowed
connection, and hand that connection back when they lose.

Fail-over needs no step of ours: when the leader's connection dies, PostgreSQL drops the lock
with the session, and the next follower to try leads (within ``FOLLOWER_TRY_EVERY`` intervals:
5 s at the default interval of 1 s, which a rescue's bound, the heartbeat's 60 s, absorbs). A
leader gives the connection back when its runtime stops (``resign`` from ``Worker.shutdown``,
after the pass under way has ended: the pool's reset runs ``pg_advisory_unlock_all()``, so the
lock is free when shutdown returns), when it fails (the maintenance loop is cancelled, and a
cancelled task terminates the connection instead: the lock goes when its backend exits), and
when a pass fails, so the failed connection is never reused; its next try is a follower's.

Before, each pass took and released the lock, so N runtimes ran up to N passes an interval
among them: 50 idle runtimes ran 5 a second, five sixths of PostgreSQL's CPU
(benchmarks/README.md, idle fleet). A one-off pass (``Client.run_maintenance``) still takes the
lock for that pass only, or runs on the held connection when its client leads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from storage.db.pool import Conn, connection_of, give_back
from storage.db.sql import TRY_LOCK_MAINTENANCE_LEADER
from storage.ops.maintenance import PassReport

FOLLOWER_TRY_EVERY = 5
"""A runtime that does not lead tries the leader's lock on one interval in this many."""

Pass = Callable[[Conn], Awaitable[PassReport]]


class MaintenanceLeader:
    """One client's share of maintenance leadership: the connection holding the lock, if any."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._held: PoolConnectionProxy[asyncpg.Record] | None = None
        self._turn = asyncio.Lock()  # one pass at a time on the held connection
        self._waited = 0  # intervals since this follower last tried

    @property
    def leading(self) -> bool:
        """Whether this client holds the lock on a live connection."""
        raw = connection_of(self._held) if self._held is not None else None
        return raw is not None and not raw.is_closed()

    async def lead(self, run: Pass) -> PassReport:
        """A runtime's pass: on the held connection while this client leads; else, on the
        first call and every ``FOLLOWER_TRY_EVERY``-th after, try the lock and keep it."""
        async with self._turn:
            if not self.leading:
                await self._resign()  # a dead held connection goes back to the pool
                waited, self._waited = self._waited, (self._waited + 1) % FOLLOWER_TRY_EVERY
                if waited or not await self._take():
                    return PassReport(leader=False)
            return await self._run_held(run)

    async def once(self, run: Pass, borrowed: Callable[[], Awaitable[PassReport]]) -> PassReport:
        """A one-off pass: on the held connection when this client leads, else ``borrowed``
        (which takes the lock for one pass on a connection of its own)."""
        async with self._turn:
            if self.leading:
                return await self._run_held(run)
        return await borrowed()

    async def resign(self) -> None:
        """Give the lock up with its connection (at shutdown); a no-op for a follower."""
        async with self._turn:
            await self._resign()

    async def _take(self) -> bool:
        conn = await self._pool.acquire()
        try:
            won = bool(await conn.fetchval(TRY_LOCK_MAINTENANCE_LEADER))
        except BaseException:
            await give_back(self._pool, conn)
            raise
        if not won:
            await give_back(self._pool, conn)
            return False
        self._held = conn
        return True

    async def _run_held(self, run: Pass) -> PassReport:
        assert self._held is not None
        try:
            return await run(self._held)
        except BaseException:  # a failed (or cancelled) pass: leadership goes with the connection
            await self._resign()
            raise

    async def _resign(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            await give_back(self._pool, held)  # the reset unlocks; a dead one is terminated
