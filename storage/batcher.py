"""The completion batcher: compact completions are flushed together, at 512 jobs or about 1 ms
after the first request, in one transaction per flush.

The batcher owns each request's sealed output until the flush commits and lends it to every
retry, so a flush retried after a lost connection publishes the same value; a retry that finds
its own earlier commit reports ``ALREADY`` rather than stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import asyncpg

from storage import compact_writes
from storage.attempt import CompactCompletion, Outcome
from storage.supervise import retry_transient

FLUSH_SIZE = 512
FLUSH_DELAY_SECONDS = 0.001


Done = Callable[[CompactCompletion, "Outcome | Exception"], None]
"""Told a submitted completion's outcome once its flush committed, or the error that failed
the flush for good."""

Pending = tuple[CompactCompletion, Done]
"""A submitted completion and whom to tell (a tuple: built per job)."""


class CompletionBatcher:
    """Collects compact completions and flushes them; ``submit`` resolves after commit."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        outputs_supported: Callable[[], Awaitable[bool]],
        *,
        flush_size: int = FLUSH_SIZE,
        flush_delay: float = FLUSH_DELAY_SECONDS,
        max_concurrent_flushes: int = 2,
    ) -> None:
        self._pool = pool
        self._outputs_supported = outputs_supported
        self._flush_size = flush_size
        self._flush_delay = flush_delay
        self._pending: list[Pending] = []
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(max_concurrent_flushes)

    def submit_with(self, item: CompactCompletion, done: Done) -> None:
        """Queue ``item`` for a flush; ``done`` hears its outcome (no future, no wake-up of the
        submitter: the runtime's attempts end this way)."""
        self._pending.append((item, done))
        if len(self._pending) >= self._flush_size:
            self._start_flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self._flush_delay, self._start_flush
            )

    def submit(self, item: CompactCompletion) -> asyncio.Future[Outcome]:
        """Queue ``item`` for a flush; the future resolves to its outcome after commit."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self.submit_with(item, partial(_settle, future))
        return future

    @property
    def idle(self) -> bool:
        return not self._pending and not self._flushes

    async def drain(self) -> None:
        """Flush what is pending and wait for every flush in progress."""
        self._start_flush()
        while self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    def _start_flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending = self._pending[: self._flush_size], self._pending[self._flush_size :]
        task = asyncio.get_running_loop().create_task(self._flush(batch))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)
        if self._pending:
            self._start_flush()

    async def _flush(self, batch: list[Pending]) -> None:
        items = [item for item, _ in batch]
        async with self._gate:
            try:
                outcomes: Sequence[Outcome | Exception] = await self._flush_with_retries(items)
            except Exception as exc:
                outcomes = [exc] * len(batch)
        for (item, done), outcome in zip(batch, outcomes, strict=True):
            done(item, outcome)

    async def _flush_with_retries(self, items: list[CompactCompletion]) -> list[Outcome]:
        async def flush() -> list[Outcome]:
            supported = await self._outputs_supported()
            async with self._pool.acquire() as conn:
                # A retry's "already" is its own earlier commit whose ack was lost.
                return await compact_writes.complete_compact(
                    conn, items, outputs_supported=supported
                )

        # Transient: the connection or the server (including asyncpg's "another operation is
        # in progress" on a connection killed mid-statement).
        return await retry_transient("completion flush", flush, stop=self._pool.is_closing)


def _settle(future: asyncio.Future[Outcome], _item: object, outcome: Outcome | Exception) -> None:
    if future.done():  # its waiter gave up
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
