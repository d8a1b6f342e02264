"""The demo backs up one queue now and then (``awa_tui.demo_backlog``), so "which queue is
backing up" can be practised: its schedule stalls the images queue's consumer, whose depth and
lag then grow in ``list_queues`` (what the Queues screen shows), and drains when it ends.
Driven through the schedule's own ``step``, not by waiting minutes."""

from __future__ import annotations

from awa_tui.demo import ResizeImage, register
from awa_tui.demo_backlog import Backlog
from storage import Client, JobState, QueueSummary
from tests.storage.observe import until


def test_the_schedule_stalls_one_queue_for_a_minute_every_few_minutes() -> None:
    backlog = Backlog(first=60, period=300, stall=60)
    stalled = [t for t in range(0, 1200) if backlog.stalled_at(t)]
    assert stalled[:1] == [60]
    phases = [t for t in stalled if t - 1 not in stalled]  # each stall's first second
    assert phases == [60, 360, 660, 960]
    assert all(backlog.stalled_at(t + 59) and not backlog.stalled_at(t + 60) for t in phases)
    assert not backlog.stalled_at(59)
    assert not backlog.stalled_at(200)


async def test_a_stall_backs_the_queue_up_and_it_drains_after(client: Client) -> None:
    backlog = Backlog()
    register(client, backlog)
    await client.start(backlog.queue_limits(spec.queue for spec in client.tasks.values()))
    assert backlog.step(backlog.first + 1)  # the stall begins

    await client.insert_many(
        [ResizeImage(image_id=n, width=800, height=600) for n in range(8)], returning="ids"
    )

    async def images() -> QueueSummary:
        return next(q for q in await client.list_queues() if q.queue == "images")

    async def backed_up() -> bool:
        q = await images()
        running, waiting = q.counts.get(JobState.RUNNING, 0), q.counts.get(JobState.AVAILABLE, 0)
        stuck = running == backlog.limit and waiting == 8 - backlog.limit
        return stuck and q.completed_5m == 0

    await until(backed_up)  # two handlers stalled, the other six wait: lag grows
    for _ in range(20):  # and it stays backed up while the stall lasts
        assert await backed_up()
    assert (await images()).oldest_available_at is not None

    assert not backlog.step(backlog.first + backlog.stall)  # the stall ends

    async def drained() -> bool:
        q = await images()
        left = sum(q.counts.get(s, 0) for s in (JobState.RUNNING, JobState.AVAILABLE))
        return left == 0 and q.completed_5m == 8

    await until(drained)
    assert (await images()).oldest_available_at is None
