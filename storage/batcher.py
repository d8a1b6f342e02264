"""The completion batcher: compact completions are flushed together, at 512 jobs or about 1 ms
after the first request, in one transaction per flush.

The batcher owns each request's sealed output until the flush commits and lends it to every
retry, so a flush retried after a lost connection publishes the same value; a retry that finds
its own earlier commit reports ``ALREADY`` rather than stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg

from storage import compact_writes
from storage.attempt import CompactCompletion, Outcome
from storage.supervise import retry_transient

FLUSH_SIZE = 512
FLUSH_DELAY_SECONDS = 0.001


Pending = tuple[CompactCompletion, "asyncio.Future[Outcome]"]
"""A submitted completion and the future its submitter awaits (a tuple: built per job)."""


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

    def submit(self, item: CompactCompletion) -> asyncio.Future[Outcome]:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self._flush_size:
            self._start_flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self._flush_delay, self._start_flush
            )
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
        async with self._gate:
            try:
                outcomes = await self._flush_with_retries([item for item, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if not future.done():
                future.set_result(outcome)

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
