"""Test harnesses that behave like the runtime.

``work_one`` claims one job and runs it through the same executor and finalize path as the
runtime, then returns the row re-read after finalization. ``HandlerJob`` is a stand-in job for
unit-testing a handler without a database; its output slot validates with the same converter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from storage import claim, executor
from storage.attempt import Ended
from storage.client import Client
from storage.job import Job
from storage.models import JobRow
from storage.output import OutputSlot


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
    async with client.pool.acquire() as conn:
        claimed = await claim.claim_batch(conn, list(queues), 1, deadline_seconds)
    if not claimed:
        return None
    ended = await executor.run_attempt(client, claimed[0])
    await client.batcher.drain()
    return WorkResult(ended, await client.get_job(claimed[0].job_id))


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
            tags=list(tags),
            metadata=dict(metadata or {}),
            errors=[],
            progress=None,
            _slot=OutputSlot(expected_type=output_type),
        )

    def seal(self) -> str | None:
        """Seal the slot as the runtime does when the handler returns; returns the stored text."""
        return self._slot.seal()
