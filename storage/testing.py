"""Test harnesses that behave like the runtime.

``work_one`` claims one job and runs it through the same executor and finalize path as the
runtime, then returns the row re-read after finalization. ``HandlerJob`` is a stand-in job for
unit-testing a handler without a database; its output slot validates with the same converter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from storage.client import Client
from storage.db.pool import pooled
from storage.finalize.types import AttemptRef, CompactCompletion, Ended, Outcome
from storage.runtime import claim, executor
from storage.runtime.job import Job
from storage.values.models import JobRow
from storage.values.output import OutputSlot


@dataclass(frozen=True)
class WorkResult:
    """What ``work_one`` did: the transition's effect and the row as stored afterwards."""

    ended: Ended
    row: JobRow | None

    @property
    def output(self) -> Any:
        return None if self.row is None else self.row.output


async def work_one(
    client: Client, queues: Sequence[str] = ("default",), *, deadline_seconds: float = 1800.0
) -> WorkResult | None:
    """Claim and run one job from ``queues``; None when nothing is available."""
    async with pooled(client.pool) as conn:
        claimed = await claim.claim_batch(conn, list(queues), 1, deadline_seconds)
    if not claimed:
        return None
    waiter = AttemptWaiter(client, claimed[0])
    ended = await executor.run_attempt(client, claimed[0], waiter)
    if ended is None:  # a compact completion: its end comes with the flush
        await client.batcher.drain()
        ended = await waiter.ended
    return WorkResult(ended, await client.get_job(claimed[0].job_id))


class AttemptWaiter:
    """``work_one``'s ``executor.Tracker``: a compact completion's end as a future."""

    completion: CompactCompletion  # set when the executor queues it for a flush

    def __init__(self, client: Client, claimed: claim.ClaimedJob) -> None:
        self.client = client
        self.claimed = claimed
        self.job: Job[Any] | None = None
        self.ended: asyncio.Future[Ended] = asyncio.get_running_loop().create_future()

    def has_state(self) -> bool:
        ref = AttemptRef(self.claimed.job_id, self.claimed.run_lease, self.claimed.claim_id)
        return self.client.has_attempt_state(ref)

    def flushed(self, item: CompactCompletion, outcome: Outcome | Exception) -> None:
        if isinstance(outcome, Exception):
            self.ended.set_exception(outcome)
        else:
            ended = executor.compact_ended(self.client, self.claimed, item.output_text, outcome)
            self.ended.set_result(ended)


class HandlerJob(Job[Any]):
    """A job for calling a handler directly in a unit test (no database)."""

    def __init__(
        self,
        args: Any,
        *,
        kind: str = "test",
        queue: str = "default",
        job_id: int = 1,
        attempt: int = 1,
        max_attempts: int = 25,
        output_type: type | None = None,
        metadata: dict[str, Any] | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        super().__init__(
            id=job_id,
            kind=kind,
            queue=queue,
            args=args,
            attempt=attempt,
            max_attempts=max_attempts,
            priority=2,
            run_lease=1,
            _tags=list(tags),
            _metadata=dict(metadata or {}),
            _errors=[],
            progress=None,
            _slot=OutputSlot(expected_type=output_type),
        )

    def seal(self) -> str | None:
        """Seal the slot as the runtime does when the handler returns; returns the stored text."""
        return self.finish().output_text
